"""`uv`-style ``py_executable``s (``PY_EXECUTABLES.BASE`` and friends): one environment per
node per job, built before the workers start and reused by every actor of every group that
asks for the same one, instead of Ray's per-actor uv hook (a build storm on a big node).

A ``py_executable`` that starts with ``uv`` is read as a ``uv run`` command line; supported:
``--with PKG``, ``--with-requirements FILE``, ``--find-links DIR`` (``-f``), ``--offline``,
``--index-url URL``, and a project sync with ``--locked`` / ``--frozen`` [``--project DIR`` or ``--directory DIR``]
[``--extra X``]. The environment lives in the job's node-local temp dir (``/tmp/srl-<job>/venvs``
on a SLURM node, Ray's session dir for a local run), so it goes when the job ends. It sees the
driver's site-packages (Ray itself must import in it) behind its own packages.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from ...core.events import write_atomic
from ...core.job_env import JobEnvironment

_PREPARED: dict[str, set[str]] = {}  # env dir -> Ray node ids where this driver saw it built


def is_uv(py_executable: str) -> bool:
    return shlex.split(py_executable)[:1] == ["uv"]


def parse_uv_run(py_executable: str) -> dict[str, Any]:
    """``uv run ...`` -> what to build; ValueError names an option we do not support."""
    words = shlex.split(py_executable)
    if words[:2] != ["uv", "run"]:
        raise ValueError(f"py_executable {py_executable!r}: a uv environment is written 'uv run [options]'")
    spec: dict[str, Any] = {
        "with": [],
        "requirements": [],
        "find_links": [],
        "offline": False,
        "index_url": None,
        "sync": None,
        "project": None,
        "extras": [],
    }
    takes = {
        "--with": "with",
        "--with-requirements": "requirements",
        "--find-links": "find_links",
        "-f": "find_links",
        "--extra": "extras",
    }
    it = iter(words[2:])
    for word in it:
        if word in takes:
            spec[takes[word]].append(next(it, ""))
        elif word in ("--locked", "--frozen"):
            spec["sync"] = word
        elif word in ("--project", "--directory"):  # the project is found from --directory as uv does
            spec["project"] = next(it, "")
        elif word == "--index-url":
            spec["index_url"] = next(it, "")
        elif word == "--offline":
            spec["offline"] = True
        else:
            raise ValueError(
                f"py_executable {py_executable!r}: unsupported uv run option {word!r}; supported: "
                f"--with, --with-requirements, --find-links, --offline, --index-url, --locked, --frozen, "
                f"--project, --directory, --extra"
            )
    for key in ("requirements", "find_links"):
        spec[key] = [str(Path(p).resolve()) for p in spec[key]]
    if spec["sync"]:
        spec["project"] = str(Path(spec["project"] or os.getcwd()).resolve())
    return spec


def env_root() -> str:
    """The job-scoped, node-local directory the environments go into (same path on every node)."""
    env = JobEnvironment.current()
    if env.in_slurm_rl_job and env.job_id:
        from ...core.paths import node_temp_dir

        return f"{env.temp_dir or node_temp_dir(env.job_id)}/venvs"
    import ray

    node = ray._private.worker._global_node
    assert node is not None, "env_root() runs in a process connected to Ray"
    return f"{node.get_session_dir_path()}/venvs"  # local run: gone with the session


def env_dir(py_executable: str, root: str) -> str:
    spec = parse_uv_run(py_executable)
    lock = Path(spec["project"] or "/nonexistent") / "uv.lock"
    digest = hashlib.sha256(
        repr((sorted(spec.items()), sys.executable, lock.read_bytes() if lock.is_file() else b"")).encode()
    ).hexdigest()[:12]
    return f"{root}/uv-{digest}"


def _uv() -> str:
    found = shutil.which("uv")
    if found:
        return found
    try:
        from uv import find_uv_bin

        return str(find_uv_bin())
    except ImportError:
        raise RuntimeError("py_executable starts with 'uv' but uv is not installed here: pip install uv") from None


def _ray_node_id() -> str | None:
    import ray

    return ray.get_runtime_context().get_node_id() if ray.is_initialized() else None


def build(spec: dict[str, Any], path: str) -> dict[str, Any]:
    """Build the environment at ``path`` on this node unless it is there (a file lock makes
    concurrent builders on one node wait for the first). Runs inside a Ray task (``node`` is
    its Ray node) or in a plain process (``node`` is None)."""
    import fcntl
    import site

    t0 = time.monotonic()
    node = _ray_node_id()
    python = f"{path}/bin/python"
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with open(f"{path}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if Path(f"{path}/.ready").exists():
            return {"node": node, "python": python, "built": False, "seconds": time.monotonic() - t0}
        uv = _uv()
        env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}

        def run(argv: list[str], extra_env: dict[str, str] | None = None) -> None:
            res = subprocess.run(argv, capture_output=True, text=True, env={**env, **(extra_env or {})}, check=False)
            if res.returncode != 0:
                raise RuntimeError(
                    f"building the uv environment {path} failed: `{' '.join(argv)}` exited "
                    f"{res.returncode}: {res.stderr.strip()[-1500:]}"
                )

        run([uv, "venv", "--quiet", "--python", sys.executable, path])
        # the driver's packages (ray first of all) behind the environment's own
        purelib = subprocess.run(
            [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
        # addsitedir (not a bare path) so the .pth files there run too (editable installs)
        write_atomic(
            Path(purelib, "_slurm_rl_base.pth"),
            "".join(f"import site; site.addsitedir({d!r})\n" for d in site.getsitepackages()),
        )
        common = [
            *(["--offline"] if spec["offline"] else []),
            *(["--index-url", spec["index_url"]] if spec["index_url"] else []),
            *[a for d in spec["find_links"] for a in ("--find-links", d)],
        ]
        if spec["sync"]:
            run(
                [
                    uv,
                    "sync",
                    spec["sync"],
                    "--inexact",
                    "--project",
                    spec["project"],
                    *common,
                    *[a for e in spec["extras"] for a in ("--extra", e)],
                ],
                {"UV_PROJECT_ENVIRONMENT": path},
            )
        packages = [*spec["with"], *[a for r in spec["requirements"] for a in ("-r", r)]]
        if packages:
            run([uv, "pip", "install", "--quiet", "--python", python, *common, *packages])
        write_atomic(Path(f"{path}/.ready"), f"{time.time()}\n")  # other workers wait for it
    return {"node": node, "python": python, "built": True, "seconds": time.monotonic() - t0}


def prepare(py_executable: str, placement_groups: list[Any]) -> str:
    """Make sure the environment exists on every node hosting these placement groups (one
    zero-CPU task per node not prepared yet by this driver); return its python."""
    import ray
    from ray.util.placement_group import placement_group_table
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    spec = parse_uv_run(py_executable)
    path = env_dir(py_executable, env_root())
    done = _PREPARED.setdefault(path, set())
    unique = {pg.id: pg for pg in placement_groups}.values()
    nodes = {nid for pg in unique for nid in placement_group_table(pg)["bundles_to_node_id"].values()}
    task = ray.remote(num_cpus=0)(build)
    refs = [
        task.options(scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False)).remote(spec, path)
        for node in sorted(nodes - done)
    ]
    for res in ray.get(refs):
        done.add(res["node"])
    return f"{path}/bin/python"
