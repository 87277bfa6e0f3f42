"""The node's fork server (worker_env/fork_server.py) and its client (light_setup/forked.py),
as the raylet uses them: a command run through the client behaves as if the client had exec'd
it, but starts with Ray already imported; what a fork cannot reproduce is exec'd."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from slurm_rl.distributed.worker_env.fork_environ import ROOM_BYTES, ROOM_ENV
from slurm_rl.distributed.worker_env.forking import FORK_SERVER, FORKED, start_server

pytestmark = pytest.mark.timeout(120)

PROBE = textwrap.dedent(
    """
    import json, os, sys
    out = {"argv": sys.argv[1:], "cwd": os.getcwd(), "rank": os.environ.get("RANK"), "pid": os.getpid(),
           "ppid": os.getppid(), "ray_preloaded": "ray" in sys.modules,
           "path0": [p for p in sys.path if not p.endswith("thirdparty_files")][0],
           "nofile": __import__("resource").getrlimit(__import__("resource").RLIMIT_NOFILE)[0],
           "fds": sorted(int(f) for f in os.listdir("/proc/self/fd")),
           "usr2_ignored": __import__("signal").getsignal(12) == __import__("signal").SIG_IGN,
           "proc_environ": open("/proc/self/environ", "rb").read().rstrip(b"\\0").decode().split("\\0")}
    out["room"] = [v for v in out["proc_environ"] if v.startswith("SLURM_RL_FORK_ENV_ROOM=")]
    out["proc_environ"] = [v for v in out["proc_environ"] if v not in out["room"]]
    out["room"] = [v[:30] + f"...({len(v)})" for v in out["room"]]  # its start, and its length
    print(json.dumps(out), flush=True)
    if len(sys.argv) > 1 and sys.argv[1] == "sleep":
        open(sys.argv[2], "w").write(str(os.getpid()))
        import time; time.sleep(120)
    sys.exit(3)
    """
)


def wait_for(check, timeout: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.05)
    return check()


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Path]:
    sock = Path("/tmp") / f"srl-fork-{os.getpid()}-{tmp_path.name[-12:]}"
    STARTED_UNDER[sock] = dict(os.environ)
    proc = start_server(str(sock), str(tmp_path / "server.log"))  # as a node's raylet gets it
    assert wait_for(sock.exists, 10), "the server binds its socket first"
    yield sock
    proc.kill()
    proc.wait()
    sock.unlink(missing_ok=True)


STARTED_UNDER: dict[Path, dict[str, str]] = {}  # each server's environment at its start


def client(sock: Path, script: Path, *args: str, env: dict[str, str] | None = None, **kw) -> subprocess.Popen:
    """The client as the raylet starts it: ``python -S forked.py --via=SOCKET SCRIPT ARGS``, in
    the environment its server started under (as a raylet's clients are), a worker's RANK set."""
    full = {**STARTED_UNDER.get(sock, os.environ), "RANK": "7", **(env or {})}
    command = [sys.executable, "-S", str(FORKED), f"--via={sock}", str(script), *args]
    return subprocess.Popen(command, env=full, stdout=subprocess.PIPE, text=True, **kw)


@pytest.fixture
def probe(tmp_path: Path) -> Path:
    path = tmp_path / "scripts" / "probe.py"
    path.parent.mkdir()
    path.write_text(PROBE)
    return path


def test_a_forked_command_is_the_clients_command_with_ray_already_imported(
    server: Path, probe: Path, tmp_path: Path
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    proc = client(server, probe, "a", "b c", cwd=work)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 3  # the script's own exit code is the client's
    seen = json.loads(out)
    assert seen["argv"] == ["a", "b c"] and seen["cwd"] == str(work) and seen["rank"] == "7"
    # /proc/PID/environ (ps e, slurm-rl stacks' RANK) shows the client's environment, not the server's
    assert sorted(seen["proc_environ"]) == sorted(f"{k}={v}" for k, v in {**STARTED_UNDER[server], "RANK": "7"}.items())
    [room] = seen["room"]  # the block's unused rest: one variable, not thousands of empty strings
    assert room.startswith(ROOM_ENV + "=....."), room
    assert seen["path0"] == str(probe.parent)  # as `python probe.py` sets it (after Ray's own entry)
    assert seen["ray_preloaded"] and seen["pid"] != proc.pid  # a fork of the server's zygote
    assert seen["nofile"] == __import__("resource").getrlimit(__import__("resource").RLIMIT_NOFILE)[0]
    assert seen["fds"][:3] == [0, 1, 2] and len(seen["fds"]) <= 4  # its stdio, nothing of the server's
    # a second command with the same RAY_* environment comes from the same zygote
    second = json.loads(client(server, probe, cwd=work).communicate(timeout=60)[0])
    assert second["ppid"] == seen["ppid"] and second["pid"] != seen["pid"]
    # another job's workers (another RAY_JOB_ID) get a zygote of their own: Ray reads it once
    # (with the PYTHONBREAKPOINT Ray's ray.init puts in a driver's environment, and so in its
    # workers': Python reads it at each breakpoint(), so it does not stop a fork)
    job_env = {"RAY_JOB_ID": "02000000", "PYTHONBREAKPOINT": "ray.util.rpdb._driver_set_trace"}
    other = json.loads(client(server, probe, env=job_env, cwd=work).communicate(timeout=60)[0])
    assert other["ppid"] != seen["ppid"] and other["ray_preloaded"]


def test_what_a_fork_cannot_reproduce_is_execd(server: Path, probe: Path, tmp_path: Path) -> None:
    # another hash seed (or interpreter, or flag) than the server's: the client execs the script
    proc = client(server, probe, env={"PYTHONHASHSEED": "123"})
    seen = json.loads(proc.communicate(timeout=60)[0])
    assert proc.returncode == 3 and seen["pid"] == proc.pid and not seen["ray_preloaded"]
    # an environment larger than /proc/PID/environ's room in a fork: the same, and ps e shows it
    proc = client(server, probe, env={"BIG": "x" * (ROOM_BYTES + 1024)})
    seen = json.loads(proc.communicate(timeout=60)[0])
    assert seen["pid"] == proc.pid and "RANK=7" in seen["proc_environ"]
    # no server at all: the same
    proc = client(tmp_path / "no-such-socket", probe, "x")
    seen = json.loads(proc.communicate(timeout=60)[0])
    assert proc.returncode == 3 and seen["pid"] == proc.pid and seen["argv"] == ["x"]


def test_a_site_with_startup_code_of_its_own_execs_every_command(probe: Path, tmp_path: Path) -> None:
    """sitecustomize (or usercustomize) runs in every Python at its start: a fork would skip it."""
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    (hooks / "sitecustomize.py").write_text("import os\nos.environ['RANK'] = 'from-sitecustomize'\n")
    env = {**os.environ, "PYTHONPATH": str(hooks)}
    sock = Path("/tmp") / f"srl-fork-hooks-{os.getpid()}"
    server = subprocess.Popen([sys.executable, str(FORK_SERVER), str(sock)], env=env)
    try:
        assert wait_for(sock.exists, 10)
        proc = client(sock, probe, env={"PYTHONPATH": str(hooks)})
        seen = json.loads(proc.communicate(timeout=60)[0])
        assert seen["pid"] == proc.pid and seen["rank"] == "from-sitecustomize"
    finally:
        server.kill()
        server.wait()
        sock.unlink(missing_ok=True)


def test_signals_reach_the_fork_and_a_killed_client_takes_it_along(server: Path, probe: Path, tmp_path: Path) -> None:
    # a signal the client was started ignoring (the job's warning signal, SIGUSR2: the node's
    # bootstrap ignores it for all its children) is ignored by the fork too, as exec keeps it
    ignore_usr2 = lambda: signal.signal(signal.SIGUSR2, signal.SIG_IGN)  # noqa: E731
    for how in (signal.SIGTERM, signal.SIGKILL):
        pid_file = tmp_path / f"pid-{how}"
        proc = client(server, probe, "sleep", str(pid_file), preexec_fn=ignore_usr2)
        assert wait_for(lambda f=pid_file: f.exists() and f.read_text() != "")
        fork = psutil.Process(int(pid_file.read_text()))
        assert fork.pid != proc.pid and json.loads(proc.stdout.readline())["usr2_ignored"]  # type: ignore[union-attr]
        proc.send_signal(signal.SIGUSR2)
        fork.send_signal(signal.SIGUSR2)
        # a death by SIGUSR2 is immediate: neither ends within the half second it would take at most
        gone = lambda f=fork, c=proc: c.poll() is not None or not f.is_running() or f.status() == psutil.STATUS_ZOMBIE  # noqa: E731
        assert not wait_for(gone, 0.5)
        proc.send_signal(how)
        proc.wait(timeout=20)
        assert wait_for(lambda f=fork: not f.is_running() or f.status() == psutil.STATUS_ZOMBIE), how
        if how == signal.SIGTERM:  # the client ends as its fork did
            assert proc.returncode == -signal.SIGTERM
    # a fork killed by itself (the raylet kills a registered worker by its own pid): the client
    # ends the same way, SIGKILL included
    pid_file = tmp_path / "pid-fork-killed"
    proc = client(server, probe, "sleep", str(pid_file))
    assert wait_for(lambda: pid_file.exists() and pid_file.read_text() != "")
    os.kill(int(pid_file.read_text()), signal.SIGKILL)
    assert proc.wait(timeout=20) == -signal.SIGKILL


def test_the_server_ends_with_the_raylet_it_served_and_its_forks_with_it(
    server: Path, probe: Path, tmp_path: Path
) -> None:
    pid_file = tmp_path / "pid"
    # a stand-in raylet: the parent of the server's first client
    raylet = subprocess.Popen(
        ["bash", "-c", f'"{sys.executable}" -S {FORKED} --via={server} {probe} sleep {pid_file} & wait'],
        stdout=subprocess.DEVNULL,
        env=STARTED_UNDER[server],
    )
    assert wait_for(lambda: pid_file.exists() and pid_file.read_text() != "")
    fork = psutil.Process(int(pid_file.read_text()))
    raylet.kill()
    raylet.wait()
    assert wait_for(lambda: not server.exists(), 15), "the server stops serving once its raylet is gone"
    assert wait_for(lambda: not fork.is_running() or fork.status() == psutil.STATUS_ZOMBIE, 15)


def test_a_pythonpath_of_its_own_forks_unless_it_hides_what_the_zygote_imported(server: Path, tmp_path: Path) -> None:
    """A job's driver puts the experiment's folder first on PYTHONPATH and its workers get the
    driver's variables: they fork, with sys.path as Python makes it of their PYTHONPATH. A new
    entry that holds a module the zygote imported from elsewhere (here yaml) means exec."""
    script = tmp_path / "uses_path.py"
    script.write_text(
        "import json, os, sys\npreloaded = 'ray' in sys.modules\nimport ray, next_to_it, yaml\n"
        "print(json.dumps({'pid': os.getpid(), 'path': sys.path, 'value': next_to_it.VALUE,"
        " 'shadow': getattr(yaml, 'SHADOW', False), 'ray_preloaded': preloaded}))\n"
    )
    extra = tmp_path / "extra"
    extra.mkdir()
    (extra / "next_to_it.py").write_text("VALUE = 7\n")
    base = os.environ.get("PYTHONPATH", "")
    env = {"PYTHONPATH": os.pathsep.join(filter(None, [str(extra), base]))}
    proc = client(server, script, env=env)
    seen = json.loads(proc.communicate(timeout=60)[0])
    assert seen["pid"] != proc.pid and seen["ray_preloaded"], seen  # forked
    assert seen["value"] == 7 and not seen["shadow"]
    execd = subprocess.run(
        [sys.executable, str(script)], env={**os.environ, **env}, capture_output=True, text=True, timeout=60, check=True
    )
    assert seen["path"] == json.loads(execd.stdout)["path"], "sys.path as in an exec'd process, Ray's entry first"
    (extra / "yaml.py").write_text("SHADOW = True\nimport sys\n")
    proc = client(server, script, env={"PYTHONPATH": os.pathsep.join(filter(None, [str(extra), base]))})
    seen = json.loads(proc.communicate(timeout=60)[0])
    assert seen["pid"] == proc.pid and seen["shadow"], seen  # exec'd: its yaml is the one it sees


def test_a_forked_and_an_execd_process_waiting_alike_show_one_stack(server: Path, tmp_path: Path) -> None:
    """`slurm-rl stacks` groups processes by their frames: a forked worker's outermost frames are
    the fork server's and runpy's, which an exec'd one lacks; neither may be shown as the one
    that "differs from its peers" (the stall report's pointer to a stuck rank)."""
    from slurm_rl.core.stacks_report import render
    from slurm_rl.job.stacks_watch import capture

    stacks_dir = tmp_path / "node-stacks"
    script = tmp_path / "waits.py"
    script.write_text(
        "import os, sys, threading\nfrom slurm_rl.core.stacks import arm\n"
        "def waits_in_a_collective():\n    threading.Event().wait()\n"
        "arm(os.environ['SLURM_RL_STACKS_DIR'], 'worker')\nprint(os.getpid(), flush=True)\nwaits_in_a_collective()\n"
    )
    env = {"SLURM_RL_STACKS_DIR": str(stacks_dir), "PYTHONUNBUFFERED": "1"}  # both titles "python -u ..."
    forked = client(server, script, env={**env, "RANK": "0"})
    execd = subprocess.Popen(
        [sys.executable, "-u", str(script)], env={**os.environ, **env, "RANK": "1"}, stdout=subprocess.PIPE
    )
    try:
        pids = {int(p.stdout.readline()) for p in (forked, execd)}  # type: ignore[union-attr]
        assert forked.pid not in pids, "the client's command was forked"
        found: list = []

        def settled() -> bool:  # both past their start, waiting where the script sends them
            found[:] = capture(str(stacks_dir), "node7")
            return len(found) == 2 and all(s.main and s.main[0].startswith("wait (") for s in found)

        assert wait_for(settled), found
        raw = "".join(p.read_text() for p in stacks_dir.glob("*.txt"))
        assert "fork_server.py" in raw and "runpy" in raw  # what the fork's dump holds
        assert found[0].main == found[1].main, found
        assert found[0].main[-1].startswith("<module> (") and "waits.py:" in found[0].main[-1]
        report = render("42", {"node7": found}, [], None)
        assert "2 workers: ranks 0,1 on node7" in report and "differs" not in report, report
    finally:
        for p in (forked, execd):
            p.kill()
            p.wait()


ENV_PROBE = textwrap.dedent(
    """
    import json, os, sys, time
    print(json.dumps({"pid": os.getpid(), "ppid": os.getppid(), "ray_preloaded": "ray" in sys.modules,
                      "env": dict(os.environ), "tz": time.strftime("%Z", time.localtime(0)),
                      "proc_environ": open("/proc/self/environ", "rb").read().decode().split("\\0")}))
    """
)


def test_a_fork_may_differ_only_in_variables_read_after_start_and_sees_each(server: Path, tmp_path: Path) -> None:
    """The one rule (fork_rule.py): each variable a fork may differ in is read by the program
    through os.environ, which the fork has, /proc/PID/environ with it; any other difference execs."""
    sys.path.insert(0, str(FORK_SERVER.parent))  # a script of its folder, as the server imports it
    try:
        from fork_rule import LATE_NAMES, LATE_PREFIXES  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(FORK_SERVER.parent))
    script = tmp_path / "env_probe.py"
    script.write_text(ENV_PROBE)
    for name in sorted(LATE_NAMES - {"PYTHONPATH", "PYTHONUNBUFFERED"}) + [p + "X_PROBE" for p in LATE_PREFIXES]:
        value = {"PYTHONBREAKPOINT": "ray.util.rpdb.set_trace", "SPT_NOENV": "1"}.get(name, f"v-{name}")
        proc = client(server, script, env={name: value})
        seen = json.loads(proc.communicate(timeout=60)[0])
        assert seen["pid"] != proc.pid and seen["ray_preloaded"], f"{name} differs: the client was exec'd"
        assert seen["env"][name] == value and f"{name}={value}" in seen["proc_environ"], name


READ_AT_START = [("TZ", "JST-9"), ("LANG", "C.UTF-8"), ("MALLOC_ARENA_MAX", "2"), ("GRPC_VERBOSITY", "debug"),
                 ("LC_ALL", "C"), ("TMPDIR", "/var/tmp")]  # fmt: skip


@pytest.mark.parametrize("name, value", READ_AT_START)
def test_a_variable_read_at_start_makes_the_client_exec_and_behave_as_exec_would(
    server: Path, tmp_path: Path, name: str, value: str
) -> None:
    script = tmp_path / "env_probe.py"
    script.write_text(ENV_PROBE)
    base = STARTED_UNDER[server]
    if base.get(name) == value:
        value += "x"
    proc = client(server, script, env={name: value})
    seen = json.loads(proc.communicate(timeout=60)[0])
    assert seen["pid"] == proc.pid and not seen["ray_preloaded"], f"{name} differs: it must be exec'd"
    if name == "TZ":  # what a fork of a UTC zygote got wrong (issue 76): its libc read TZ at start
        assert seen["tz"] == "JST"
    log = (tmp_path / "server.log").read_text()  # why, in the server's log (LANG: Python's UTF-8 mode)
    assert re.search(rf"env differs \([^)]*{name}|flags differs", log), log


def test_a_zygote_retires_once_its_forks_are_gone(tmp_path: Path, probe: Path) -> None:
    """A zygote per Ray job: once every fork of it has ended (its job ended) it ends too, and the
    job's next worker gets a new one."""
    sock = Path("/tmp") / f"srl-fork-retire-{os.getpid()}"
    STARTED_UNDER[sock] = {**os.environ, "SLURM_RL_FORK_RETIRE_S": "1"}
    env = {**STARTED_UNDER[sock], ROOM_ENV: "." * ROOM_BYTES}  # as start_server starts it
    server = subprocess.Popen([sys.executable, str(FORK_SERVER), str(sock)], env=env)
    try:
        assert wait_for(sock.exists, 10)
        first = json.loads(client(sock, probe).communicate(timeout=60)[0])
        assert first["ray_preloaded"], first
        zygote = psutil.Process(first["ppid"])
        assert zygote.ppid() == server.pid
        assert wait_for(lambda: not zygote.is_running() or zygote.status() == psutil.STATUS_ZOMBIE, 15)
        second = json.loads(client(sock, probe).communicate(timeout=60)[0])
        assert second["ray_preloaded"] and second["ppid"] != first["ppid"], "a new zygote for the next worker"
    finally:
        server.kill()
        server.wait()
        sock.unlink(missing_ok=True)


def test_a_node_forks_only_where_every_interpreter_has_one_hash_seed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Forks share their server's hash seed; exec'd siblings draw their own unless PYTHONHASHSEED
    fixes it: only then does a raylet's command go through the fork server."""
    from slurm_rl.distributed.worker_env import forking

    started: list[str] = []
    monkeypatch.setattr(forking, "start_server", lambda path, log: started.append(path))
    command = ["raylet", "--session_dir=/tmp/srl-x/session", f"{forking.WORKER_FLAG}python w.py --a"]
    for seed, forks in (("", False), ("random", False), ("0", True), ("1234", True)):
        monkeypatch.setenv("PYTHONHASHSEED", seed)
        out, _ = forking.with_fork_server(command, ["w.py"])
        assert (out != command) is forks and bool(started) is forks, seed
        started.clear()
    monkeypatch.setenv(forking.CHOICE_ENV, "0")
    assert forking.with_fork_server(command, ["w.py"])[0] == command


def test_what_torch_cuda_nccl_and_openmp_read_at_load_a_fork_reads_as_exec_would(server: Path, tmp_path: Path) -> None:
    """TORCH_*, CUDA_*, NCCL_*, OMP_*: read when those libraries load; no zygote has loaded them,
    so a fork that imports torch reads them then (OMP_NUM_THREADS: torch's own thread count)."""
    script = tmp_path / "loads.py"
    script.write_text(
        "import json, os, sys\nmaps = open('/proc/self/maps').read()\n"
        "before = {'torch': 'torch' in sys.modules, 'libs': [l for l in ('libtorch', 'libgomp', 'libcuda', 'libnccl')"
        " if l in maps], 'pid': os.getpid(), 'preloaded': 'ray' in sys.modules}\n"
        "import torch\nprint(json.dumps({**before, 'threads': torch.get_num_threads()}))\n"
    )
    proc = client(server, script, env={"OMP_NUM_THREADS": "1", "TORCH_CPP_LOG_LEVEL": "ERROR", "NCCL_DEBUG": "WARN"})
    seen = json.loads(proc.communicate(timeout=120)[0])
    assert seen["pid"] != proc.pid and seen["preloaded"], "forked"
    assert not seen["torch"] and seen["libs"] == [], "nothing that reads them is loaded before the fork"
    assert seen["threads"] == 1  # (unset: one per CPU, 2 on CI)
