"""An isolated service instance (job/isolation.py), for real with util-linux's unshare: what a
hostile program inside can see of the job's files, the node's processes and its home, and that
killing the instance's launcher leaves no process of it behind."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from slurm_rl.job.isolation import code_dir_for, hidden_dirs, isolated_argv

pytestmark = pytest.mark.skipif(shutil.which("unshare") is None, reason="no util-linux unshare")

PROBE = r"""
import glob, json, os, sys
out = {"pids": sorted(int(p) for p in os.listdir("/proc") if p.isdigit()), "environ": {}, "reads": {}}
for pid in out["pids"]:
    try:
        out["environ"][pid] = open(f"/proc/{pid}/environ", "rb").read().decode(errors="replace")
    except OSError as exc:
        out["environ"][pid] = repr(exc)
for name in sys.argv[1:]:
    try:
        out["reads"][name] = open(name).read()
    except OSError as exc:
        out["reads"][name] = type(exc).__name__
out["found"] = sorted(glob.glob(os.path.dirname(os.path.dirname(sys.argv[1])) + "/**", recursive=True))
open(os.path.join(os.environ["SLURM_RL_SERVICE_DIR"], "mine.txt"), "w").write("written\n")
try:
    open(os.path.join(os.environ["HOME"], ".bashrc"), "a").write("planted\n")
    out["home_writable"] = True
except OSError:
    out["home_writable"] = False
try:
    open("probe-wrote.txt", "w").write("x")
    out["code_writable"] = True
except OSError:
    out["code_writable"] = False
out["cwd"] = os.getcwd()
print(json.dumps(out))
"""


@pytest.fixture
def tree(tmp_path: Path) -> dict[str, Path]:
    user = tmp_path / "fileroot" / "alice"
    job = user / "exp" / "123"
    other = user / "exp" / "122"
    for d in (job / "services" / "box", other, tmp_path / "nodelocal" / "srl-123" / "sockets", tmp_path / "home/.ssh"):
        d.mkdir(parents=True)
    (job / "ray_auth_token").write_text("job-token\n")
    (other / "ray_auth_token").write_text("other-token\n")
    (tmp_path / "nodelocal" / "srl-123" / "sockets" / "raylet").write_text("socket\n")
    (tmp_path / "home" / ".ssh" / "id_ed25519").write_text("key\n")
    (tmp_path / "home" / "tool.txt").write_text("a tool the user keeps in their home\n")
    code = tmp_path / "code"
    code.mkdir()
    (code / "probe.py").write_text(PROBE)
    own = job / "services" / "box" / "node1-0.d"
    own.mkdir()
    return {"user": user, "job": job, "other": other, "code": code, "own": own, "root": tmp_path}


def run_isolated(tree: dict[str, Path], command: str, **kw: object) -> subprocess.Popen[str]:
    home = str(tree["root"] / "home")
    hide = hidden_dirs(str(tree["job"]), str(tree["root"] / "nodelocal"), home)
    argv = isolated_argv(command, str(tree["own"]), code_dir_for(str(tree["code"]), str(tree["job"])), home, hide)
    env = {"PATH": os.environ["PATH"], "HOME": home, "SLURM_RL_SERVICE_DIR": str(tree["own"])}
    return subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)  # type: ignore[call-overload]


def test_a_hostile_program_sees_only_its_dir_and_the_code_no_token_no_process_no_home(
    tree: dict[str, Path],
) -> None:
    targets = [
        tree["job"] / "ray_auth_token",
        tree["other"] / "ray_auth_token",
        tree["root"] / "nodelocal" / "srl-123" / "sockets" / "raylet",
        tree["root"] / "home" / ".ssh" / "id_ed25519",
    ]
    proc = run_isolated(tree, f"{sys.executable} probe.py " + " ".join(map(str, targets)))
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 0, stderr
    out = json.loads(stdout.splitlines()[-1])
    assert set(out["reads"].values()) == {"FileNotFoundError"}, out["reads"]  # neither token, socket nor key
    assert out["home_writable"] is False and not (tree["root"] / "home" / ".bashrc").exists()
    assert out["found"] and not [f for f in out["found"] if "token" in f or "srl-" in f], out["found"]
    # its own PID namespace: a handful of its own processes; none of this machine's
    assert out["pids"] and max(out["pids"]) <= 3, out["pids"]
    assert not any("job-token" in e or "PYTEST" in e for e in out["environ"].values()), out["environ"]
    assert out["cwd"] == str(tree["code"]) and out["code_writable"] is False
    assert (tree["own"] / "mine.txt").read_text() == "written\n"  # its own dir: the real one, writable
    assert (tree["job"] / "ray_auth_token").read_text() == "job-token\n"  # nothing outside was touched


def test_the_rest_of_the_home_stays_readable_for_the_users_own_tools(tree: dict[str, Path]) -> None:
    proc = run_isolated(tree, f"cat {tree['root'] / 'home' / 'tool.txt'}")
    stdout, stderr = proc.communicate(timeout=60)
    assert (proc.returncode, stdout) == (0, "a tool the user keeps in their home\n"), stderr


def named(procs: list[psutil.Process], name: str) -> list[psutil.Process]:
    """PROCS called NAME; one gone since it was listed (the launcher's short-lived helpers, ci90) is skipped."""
    found = []
    for p in procs:
        try:
            if p.name() == name:
                found.append(p)
        except psutil.NoSuchProcess:
            pass
    return found


def test_killing_the_launcher_ends_every_process_of_the_instance(tree: dict[str, Path]) -> None:
    proc = run_isolated(tree, "sleep 300 & sleep 301 & wait", start_new_session=True)
    deadline = time.monotonic() + 30
    sleepers: list[psutil.Process] = []
    while len(sleepers) < 2 and time.monotonic() < deadline:
        sleepers = named(psutil.Process(proc.pid).children(recursive=True), "sleep")
        time.sleep(0.05)
    assert len(sleepers) == 2, "the instance's processes never started"
    os.kill(proc.pid, signal.SIGKILL)  # unshare itself, as a hard stop of the node's task would
    proc.wait(timeout=10)
    _, alive = psutil.wait_procs(sleepers, timeout=10)
    assert not alive, alive


def test_what_is_hidden_and_what_is_kept() -> None:
    hidden = hidden_dirs("/fs/alice/exp/7", "/tmp", "/home/alice")
    assert hidden[:3] == ["/fs/alice", "/tmp", "/home/alice/.ssh"] and "/home/alice" not in hidden
    assert code_dir_for("/fs/alice/exp/7", "/fs/alice/exp/7/") == ""  # the job dir itself: no code dir
    assert code_dir_for("/home/alice/proj", "/fs/alice/exp/7") == "/home/alice/proj"
    argv = isolated_argv("serve", "/own", "", "/", ["/", "/tmp", "/tmp/", "/fs/alice"])
    assert argv[argv.index("slurm-rl-isolate") + 3 :] == ["", "serve", "/tmp", "/fs/alice"]  # "/" never; once each
