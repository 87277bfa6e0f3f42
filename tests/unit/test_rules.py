"""The house rules the docs state, held on the code (docs/architecture.md): one caller of SLURM.
Each test names the line that breaks its rule."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.unit

PKG = REPO / "slurm_rl"
SLURM_PKG = PKG / "slurm"
# every SLURM client command (slurm.schedmd.com/man_index.html)
SLURM_COMMANDS = frozenset(
    [
        "sacct",
        "sacctmgr",
        "salloc",
        "sattach",
        "sbatch",
        "sbcast",
        "scancel",
        "scontrol",
        "scrontab",
        "sdiag",
        "sh5util",
        "sinfo",
        "sprio",
        "squeue",
        "sreport",
        "srun",
        "sshare",
        "sstat",
        "strigger",
        "sview",
    ]
)


def slurm_commands_named(path: Path, root: Path = REPO) -> list[str]:
    """Each place ``path`` names a SLURM command as a program: a string that is the command's
    name, or the first word of an argv (list, tuple or a call's first argument) that starts with one."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        firsts = []
        if isinstance(node, (ast.List, ast.Tuple)) and node.elts:
            firsts.append(node.elts[0])
        if isinstance(node, ast.Call) and node.args:
            firsts.append(node.args[0])
        for item in [node, *firsts]:
            if not (isinstance(item, ast.Constant) and isinstance(item.value, str)):
                continue
            words = item.value.split()
            exact = item is node and item.value in SLURM_COMMANDS
            if exact or (item is not node and words and words[0] in SLURM_COMMANDS):
                found.append(f"{path.relative_to(root)}:{item.lineno}: {item.value!r}")
    return sorted(set(found))


def test_no_module_outside_slurm_names_a_slurm_command() -> None:
    """slurm/ is the one caller of SLURM, on the login side (SlurmClient) and the nodes'
    (slurm/from_node.py): elsewhere a SLURM command is never a program to run."""
    outside = [p for p in PKG.rglob("*.py") if SLURM_PKG not in p.parents]
    assert [hit for path in sorted(outside) for hit in slurm_commands_named(path)] == []


def test_the_rule_sees_each_way_a_module_runs_slurm(tmp_path: Path) -> None:
    planted = tmp_path / "planted.py"
    planted.write_text(
        "import shutil, subprocess\n"
        'subprocess.run(["scancel", job])\n'
        'shutil.which("sbatch")\n'
        'subprocess.run("squeue -h -j 7", shell=True)\n'
        'print(f"sbatch refused the job: {why}")\n'  # a message about a command is not a call
    )
    assert slurm_commands_named(planted, tmp_path) == [
        "planted.py:2: 'scancel'",
        "planted.py:3: 'sbatch'",
        "planted.py:4: 'squeue -h -j 7'",
    ]


# -- files another process reads are written whole (core/events.py's write_atomic) -------------
WRITE_MODES = frozenset("wax+")
# what writes in place on purpose, and why; anything else is a whole file: write_atomic
STREAMS = {
    "slurm_rl/core/members.py": (
        "os.fdopen(fd, 'w')",
        "a request created exclusively (O_EXCL); its reader waits for a whole line",
    ),
    "slurm_rl/login/submission/submit.py": (
        "os.fdopen(fd, 'w')",
        "the token, created 0600 (O_EXCL) before the job exists",
    ),
    "slurm_rl/core/stacks.py": ("open(", "faulthandler's dump file, kept open for a signal"),
    "slurm_rl/distributed/rollouts/pool.py": ("open(self.path, 'a')", "rollouts appended, one line per write"),
    "slurm_rl/driver/metrics.py": ("open(self.path, 'a')", "metrics.jsonl appended, one line per write"),
    "slurm_rl/distributed/worker_env/forking.py": ("open(log, 'ab')", "a log"),
    "slurm_rl/distributed/worker_env/uv_envs.py": ("open(f'{path}.lock', 'w')", "a lock file, never read"),
    "slurm_rl/job/head.py": ("open(ctx.paths.driver_log, 'ab')", "the driver's log"),
    "slurm_rl/job/memory.py": ("open(driver_log, 'a')", "the driver's log"),
    "slurm_rl/job/node.py": ("open(paths.node_log(node), 'a'", "a node's log"),
    "slurm_rl/job/service_instances.py": ("open(log_path, 'ab')", "a service's log"),
    "slurm_rl/login/local.py": ("open(paths.driver_log, 'wb')", "a local run's driver log"),
    "slurm_rl/laptop/session.py": ("tarfile.open(fileobj=buf", "an archive in memory"),
    "slurm_rl/login/reading/results.py": ("tarfile.open(fileobj=stream", "an archive streamed to stdout"),
}


def _mode(call: ast.Call) -> ast.expr | None:
    for kw in call.keywords:
        if kw.arg == "mode":
            return kw.value
    return call.args[1] if len(call.args) > 1 else None


def in_place_writes(path: Path, root: Path = REPO) -> list[str]:
    """Each call in ``path`` that writes a file in place: ``write_text``/``write_bytes``, or an
    ``open``/``fdopen`` with a writing mode, not one of the listed streams of that file."""
    rel = str(path.relative_to(root))
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
        hit = name in ("write_text", "write_bytes")
        if name in ("open", "fdopen"):
            m = _mode(node)
            hit = isinstance(m, ast.Constant) and isinstance(m.value, str) and bool(WRITE_MODES & set(m.value))
        text = ast.unparse(node)
        if hit and not (rel in STREAMS and text.startswith(STREAMS[rel][0])):
            found.append(f"{rel}:{node.lineno}: {text[:60]}")
    return found


def test_every_file_a_job_writes_whole_is_written_atomically() -> None:
    """A reader (the login side polling call_result.pkl, a node reading a requeue request, status
    reading a stall report, a worker its job dir pointer) sees a file whole or not at all."""
    assert [hit for path in sorted(PKG.rglob("*.py")) for hit in in_place_writes(path)] == []


def test_the_write_rule_sees_each_way_to_write_in_place(tmp_path: Path) -> None:
    planted = tmp_path / "planted.py"
    planted.write_text(
        "paths.call_result.write_bytes(blob)\n"
        "Path(marker).write_text(host)\n"
        "open(paths.stall, 'w')\n"
        "open(name, mode='wb')\n"
        "open(paths.events)\n"  # reading is no write
        "write_atomic(paths.stall, text)\n"
    )
    assert [hit.split(": ")[0] for hit in in_place_writes(planted, tmp_path)] == [
        f"planted.py:{n}" for n in (1, 2, 3, 4)
    ]


# -- one error root: every error slurm-rl raises on purpose is a SlurmRlError ------------------
# run as scripts, not imported (their imports are their directory's): read, not imported
SCRIPTS = {
    "slurm_rl.__main__",
    "slurm_rl.distributed.worker_env.fork_child",
    "slurm_rl.distributed.worker_env.fork_server",
}
# not errors: control flow that ``except Exception`` must not catch
SIGNALS = {"slurm_rl.job.ray_threads._Halted": "unwinds a thread Ray runs, past its own except Exception"}


def errors_outside_the_root(modules: list[str]) -> list[str]:
    """Each exception class defined in ``modules`` that is not a SlurmRlError (NeMo RL's keep
    their own bases beside it: WorkerBuildError is a RuntimeError too)."""
    import importlib
    import inspect

    from slurm_rl.core.errors import SlurmRlError

    found = []
    for name in modules:
        mod = importlib.import_module(name)
        for attr, cls in vars(mod).items():
            ours = inspect.isclass(cls) and issubclass(cls, BaseException) and cls.__module__ == name
            if ours and not issubclass(cls, SlurmRlError) and f"{name}.{attr}" not in SIGNALS:
                found.append(f"{name}.{attr}({', '.join(b.__name__ for b in cls.__bases__)})")
    return found


def test_every_error_slurm_rl_raises_derives_from_its_one_root() -> None:
    import pkgutil

    import slurm_rl

    modules = [m.name for m in pkgutil.walk_packages(slurm_rl.__path__, "slurm_rl.") if m.name not in SCRIPTS]
    assert errors_outside_the_root(modules) == []
    for name in SCRIPTS:  # no class there derives from anything (an error would have to be checked here)
        tree = ast.parse((REPO / (name.replace(".", "/") + ".py")).read_text())
        assert [c.name for c in ast.walk(tree) if isinstance(c, ast.ClassDef) and c.bases] == [], name


def test_the_error_rule_sees_an_error_outside_the_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "planted_errors.py").write_text(
        "from slurm_rl.core.errors import UsageError\n"
        "class Outside(RuntimeError): ...\n"
        "class Inside(UsageError): ...\n"
        "class Both(UsageError, ValueError): ...\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    assert errors_outside_the_root(["planted_errors"]) == ["planted_errors.Outside(RuntimeError)"]


# -- one environment reader: SLURM_* and SLURM_RL_* are read in core/job_env.py ----------------
JOB_ENV = PKG / "core" / "job_env.py"
# read where slurm_rl cannot be imported; job_env.py names them too
OWN_READERS = {
    ("slurm_rl/distributed/worker_env/fork_child.py", "SLURM_RL_FORK_RETIRE_S"): "the fork server's zygote, a script",
    ("slurm_rl/distributed/worker_env/hygiene.py", "SLURM_RL_STACKS_DIR"): "a setup hook Ray carries by value",
}


def _slurm_var(value: object) -> bool:
    return isinstance(value, str) and value.startswith(("SLURM_", "SLURMD_"))


def _env_names(paths: list[Path]) -> dict[str, str]:
    """Module-level names bound to a SLURM variable's name (``INDEX_ENV = "SLURM_RL_INDEX"``)."""
    out = {}
    for path in paths:
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and _slurm_var(node.value.value):
                out.update({t.id: node.value.value for t in node.targets if isinstance(t, ast.Name)})
    return out


def _is_env(e: ast.expr) -> bool:
    """An expression naming an environment: ``os.environ``, ``env``, ``self.environ``, ``os``."""
    text = ast.unparse(e).lower()
    return "env" in text or text == "os"


def env_reads(path: Path, names: dict[str, str], root: Path = REPO) -> list[str]:
    """Each read of a SLURM variable in ``path``: ``ENV.get(V)``, ``os.getenv(V)``, ``ENV[V]``,
    ``V in ENV``, V a literal or a name bound to one. Setting one (``ENV[V] = ...``) is no read."""

    def var(e: ast.expr) -> str | None:
        if isinstance(e, ast.Constant):
            return e.value if _slurm_var(e.value) else None
        name = e.id if isinstance(e, ast.Name) else e.attr if isinstance(e, ast.Attribute) else None
        return names.get(name) if name else None

    rel, found = str(path.relative_to(root)), []
    for node in ast.walk(ast.parse(path.read_text())):
        v = None
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
            if node.func.attr in ("get", "getenv") and _is_env(node.func.value):
                v = var(node.args[0])
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and _is_env(node.value):
            v = var(node.slice)
        elif isinstance(node, ast.Compare) and isinstance(node.ops[0], (ast.In, ast.NotIn)):
            v = var(node.left) if _is_env(node.comparators[0]) else None
        if v and (rel, v) not in OWN_READERS:
            found.append(f"{rel}:{node.lineno}: {v}")
    return found


def test_the_environment_is_read_in_one_place() -> None:
    """Every SLURM_* and SLURM_RL_* variable is a typed field of JobEnvironment or Settings."""
    paths = sorted(PKG.rglob("*.py"))
    names = _env_names(paths)
    assert [hit for path in paths if path != JOB_ENV for hit in env_reads(path, names)] == []


def test_the_env_rule_sees_each_way_to_read_one(tmp_path: Path) -> None:
    planted = tmp_path / "planted.py"
    planted.write_text(
        'INDEX_ENV = "SLURM_RL_INDEX"\n'
        'os.environ.get("SLURM_JOB_NAME", "")\n'
        "os.getenv(INDEX_ENV)\n"
        'env["SLURM_NODEID"]\n'
        "if INDEX_ENV in os.environ: pass\n"
        'os.environ["SLURM_RL_TEMP_DIR"] = d\n'  # setting one is no read
        'config.get("SLURM_CONF")\n'  # scontrol's config, not the environment
    )
    assert env_reads(planted, _env_names([planted]), tmp_path) == [
        "planted.py:2: SLURM_JOB_NAME",
        "planted.py:3: SLURM_RL_INDEX",
        "planted.py:4: SLURM_NODEID",
        "planted.py:5: SLURM_RL_INDEX",
    ]
