"""The container runtime as one interface (slurm_rl/runtimes): nothing outside it knows a runtime
by its name, each runtime's node step and attach, and Apptainer's doctor checks against stand-in
nodes (the lab test runs the real one)."""

from __future__ import annotations

import ast
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from slurm_rl.core.manifest import Container
from slurm_rl.runtimes import NAMES, RUNTIMES, runtime_of
from slurm_rl.runtimes.apptainer import PROBE_SHELL, judge
from slurm_rl.runtimes.base import PROBE_RUNTIME_PREFIX
from tests.conftest import REPO

pytestmark = pytest.mark.unit

PKG = REPO / "slurm_rl"
OWN = PKG / "runtimes"
NAMED = [n for n in NAMES if n != "none"]  # "none" is a word too: its comparisons are caught below
RUNTIME_ATTRS = ("runtime", "container_runtime")
WORDS = re.compile(r"\b(pyxis|enroot|apptainer|singularity)\b", re.IGNORECASE)


def _code_outside_runtimes() -> list[Path]:
    return [p for p in sorted(PKG.rglob("*.py")) if OWN not in p.parents]


def test_no_module_outside_the_runtimes_compares_a_runtime_by_name() -> None:
    found = []
    for path in _code_outside_runtimes():
        for node in ast.walk(ast.parse(path.read_text())):
            where = f"{path.relative_to(REPO)}:{getattr(node, 'lineno', '?')}"
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.lower() in NAMED:
                found.append(f"{where} the string {node.value!r}")
            if isinstance(node, ast.Compare):
                sides = [node.left, *node.comparators]
                named = [s for s in sides if isinstance(s, ast.Attribute) and s.attr in RUNTIME_ATTRS]
                if named:
                    found.append(f"{where} compares .{named[0].attr}")
    assert found == []


def test_no_shell_outside_the_runtimes_runs_a_runtime() -> None:
    """Templates and node scripts run no runtime's command: its lines come from its module."""
    found = []
    shells = [*(REPO / "templates").glob("*.j2"), *(p for p in PKG.rglob("*.sh") if OWN not in p.parents)]
    for path in shells:
        for number, line in enumerate(path.read_text().splitlines(), 1):
            code = line.strip()
            if code.startswith(("#", "{#")):
                continue
            if WORDS.search(code.split(" # ")[0]):
                found.append(f"{path.relative_to(REPO)}:{number}: {code}")
    assert found == []


def test_every_runtime_is_one_module_of_its_own() -> None:
    assert set(NAMES) == {"none", "pyxis", "apptainer"}
    for name, runtime in RUNTIMES.items():
        assert runtime.name == name and runtime_of(name) is runtime
        assert Path(type(runtime).__module__.replace(".", "/") + ".py").parent == Path("slurm_rl/runtimes")
    assert [n for n, r in RUNTIMES.items() if not r.contained] == ["none"]
    with pytest.raises(Exception, match="container_runtime 'docker': unknown; use one of none, pyxis, apptainer"):
        runtime_of("docker")


def test_each_runtime_starts_the_node_step_its_own_way() -> None:
    box = {"image": "/i.sqsh", "mounts": ("/data:/data", "/tmp:/tmp")}
    flags, prefix = runtime_of("pyxis").launch(Container(runtime="pyxis", **box), "/j")  # type: ignore[arg-type]
    assert prefix == [] and "--container-image=/i.sqsh" in flags and "--container-workdir=/j" in flags
    # Apptainer mounts the image as it is where it can, with the job's mounts and no home (the
    # image's path goes to the opening shell too: an unprivileged start without /dev/fuse runs
    # the tree extracted once per node and job instead, test_apptainer_image.py)
    gpus = Container(runtime="apptainer", gpus=True, **box)  # type: ignore[arg-type]
    flags, prefix = runtime_of("apptainer").launch(gpus, "/j")
    assert flags == [] and prefix[5:8] == ["--image=/i.sqsh", "apptainer", "exec"] and prefix[-1] == "/i.sqsh"
    assert "--nv" in prefix and "--pwd=/j" in prefix and prefix[11:13] == ["--bind", "/data:/data"]
    assert runtime_of("none").launch(Container(), "/j") == ([], [])
    assert runtime_of("apptainer").requeue_cleanup() == "" and runtime_of("pyxis").requeue_cleanup()


@pytest.mark.parametrize(
    ("node", "status", "says"),
    [
        ({"found": False}, "fail", "no apptainer on the node's PATH"),
        ({"found": True, "version": "1.0.3", "userns": True}, "fail", "apptainer 1.0.3 is older than 1.1"),
        (
            {"found": True, "version": "1.4.5", "userns": False, "setuid": False, "root": False},
            "fail",
            "no user namespaces for this user, and no setuid starter",
        ),
        ({"found": True, "version": "1.4.5", "userns": True, "root": False}, "ok", "unprivileged, in a user namespace"),
        ({"found": True, "version": "1.3.0-1.el9", "setuid": True}, "ok", "through its setuid starter"),
        ({"found": True, "version": "1.4.5", "root": True}, "ok", "as root"),
    ],
)
def test_apptainer_on_the_node_is_judged_one_line_with_the_fix(node: dict, status: str, says: str) -> None:
    check = judge(node)
    assert check.name == "apptainer" and check.status == status and says in check.found, check
    assert bool(check.fix) == (status == "fail")


def _probe(tmp_path: Path, apptainer: str | None) -> tuple[str, subprocess.CompletedProcess[str]]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    if apptainer is not None:
        (bin_dir / "apptainer").write_text(apptainer)
        (bin_dir / "apptainer").chmod(0o755)
    for tool in ("awk", "unshare", "id", "cat", "rm"):  # what the probe shell runs, and no apptainer
        real = subprocess.run(["bash", "-c", f"command -v {tool}"], capture_output=True, text=True).stdout.strip()
        if real and not (bin_dir / tool).exists():
            (bin_dir / tool).symlink_to(real)
    bash = shutil.which("bash") or "/bin/bash"
    argv = [bash, "-c", PROBE_SHELL, "probe", "/i.sif", str(tmp_path), "/scratch", "cat", "/etc/hostname"]
    res = subprocess.run(argv, capture_output=True, text=True, timeout=30, env={"PATH": str(bin_dir)})
    line = next(ln for ln in res.stdout.splitlines() if ln.startswith(PROBE_RUNTIME_PREFIX))
    return line[len(PROBE_RUNTIME_PREFIX) :], res


def test_the_probe_says_what_the_node_has_then_runs_in_the_image(tmp_path: Path) -> None:
    said, _ = _probe(tmp_path, None)
    assert json.loads(said) == {"found": False}
    fake = '#!/bin/bash\n[ "$1" = --version ] && { echo "apptainer version 1.4.5"; exit 0; }\n'
    fake += '[ "$1" = buildcfg ] && { echo /nowhere; exit 0; }\necho "ran: $*"\n'
    said, res = _probe(tmp_path, fake)
    node = json.loads(said)
    assert node["found"] is True and node["version"] == "1.4.5" and node["setuid"] is False
    assert f"ran: exec --no-mount home,cwd --bind {tmp_path}:{tmp_path} /i.sif cat /etc/hostname" in res.stdout
    assert [c.status for c in runtime_of("apptainer").probe_checks(res.stdout)] == ["ok"]
