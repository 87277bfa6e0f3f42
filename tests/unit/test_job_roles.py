"""The node bootstrap's decisions without a cluster: who a node is, when the head sees every
node joined, when a worker node stops, what exit a node records, how a failing setup line is
named. (The lab tests run the same code for real.)"""

from __future__ import annotations

import io
import itertools
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import ray

from slurm_rl.config.spec import parse_spec
from slurm_rl.core.causes import Cause
from slurm_rl.core.events import append_event, read_events
from slurm_rl.core.exits import STOPPED_RC, read_cause, read_exit, record_exit
from slurm_rl.core.job_dir import STOP_HEARD, lost_nodes
from slurm_rl.core.job_env import JobEnvironment
from slurm_rl.core.manifest import JobManifest
from slurm_rl.core.paths import JobPaths
from slurm_rl.job.board import Board
from slurm_rl.job.context import NodeContext, NodeFailure
from slurm_rl.job.head import JoinWatch, driver_env
from slurm_rl.job.node import Lifecycle
from slurm_rl.job.worker import HEAD_LOST_AFTER_S, StayDecision
from slurm_rl.login.submission.plan import plan_job
from slurm_rl.login.submission.render import render_job
from slurm_rl.login.submission.resolve import JobOptions

MANIFEST = JobManifest(
    slurm_rl_version="t",
    cluster_name="c",
    name="n",
    user="u",
    nodes=3,
    python="py",
    workdir="/w",
    experiment_src_dir="/src",
    experiment_args=("--a",),
)


def _ctx(tmp_path: Path, rank: int = 0, **env: str) -> NodeContext:
    paths = JobPaths(tmp_path / "77")  # a job dir is named by the job id
    paths.markers.mkdir(parents=True)
    environ = {
        "SLURM_JOB_ID": "77",
        "SLURM_NODEID": str(rank),
        "SLURMD_NODENAME": f"node{rank + 1}",
        "SLURM_JOB_NODELIST": "node[1-3]",
        "SLURM_CPUS_ON_NODE": "4",
        **env,
    }
    return NodeContext.from_environ(environ, paths, MANIFEST, io.StringIO())


def test_identity_from_slurm_step_variables(tmp_path: Path) -> None:
    ctx = _ctx(tmp_path, rank=2, SLURM_RESTART_COUNT="1", CUDA_VISIBLE_DEVICES="0,3")
    assert (ctx.job_id, ctx.rank, ctx.node, ctx.nodes) == ("77", 2, "node3", ["node1", "node2", "node3"])
    assert (ctx.cpus, ctx.gpus, ctx.attempt) == (4, 2, 1)
    assert ctx.stop_flag == ctx.paths.markers / "1-stop" and ctx.temp_dir == "/tmp/srl-77"


@pytest.mark.parametrize(
    ("env", "gpus"),
    [
        ({}, 0),
        ({"CUDA_VISIBLE_DEVICES": "0,1,2"}, 3),
        ({"CUDA_VISIBLE_DEVICES": "NoDevFiles"}, 0),
        ({"SLURM_GPUS_ON_NODE": "4"}, 4),
        ({"SLURM_GPUS_ON_NODE": "x"}, 0),
    ],
)
def test_gpu_count(env: dict[str, str], gpus: int) -> None:
    assert JobEnvironment.current(env).gpu_count() == gpus


ATTEMPTS = itertools.count(100)  # each test its own attempt: its own keys in the module's GCS


@pytest.fixture(scope="module")
def gcs_address() -> Iterator[str]:
    """A real GCS (an embedded local Ray) for the head's board."""
    from tests.unit.conftest import local_ray

    with local_ray(num_cpus=1):
        yield ray._private.worker.global_worker.node.gcs_address  # type: ignore[attr-defined]


@pytest.mark.ray
def test_head_hears_joins_and_failures_through_the_gcs_not_files(tmp_path: Path, gcs_address: str) -> None:
    """The board is the head's real GCS (a local Ray here): joins of this attempt count, a
    failure is named at once, and a node that never reached the GCS is heard of by its file."""
    ctx = _ctx(tmp_path)
    ctx.attempt = next(ATTEMPTS)
    board, other_attempt = Board(gcs_address, ctx.attempt), Board(gcs_address, next(ATTEMPTS))
    watch = JoinWatch(ctx, board)
    assert watch.joined() == set() and watch.missing(set()) == ["node2", "node3"]
    assert board.put("up", "node2", rank=1) and other_attempt.put("up", "node3", rank=2)
    assert watch.joined() == {1} and watch.missing({1}) == ["node3"]
    assert board.get("stop") is None and board.put("stop", "driver exited 0")
    assert board.get("stop") == "driver exited 0" and other_attempt.get("stop") is None
    ctx.paths.node_marker(ctx.attempt, 2, "failed").write_text("node3: no interface ib0\n")
    with pytest.raises(NodeFailure, match="node3: no interface ib0"):
        JoinWatch(ctx, board).joined()
    board.put("failed", "node2: ray start failed", rank=1)
    with pytest.raises(NodeFailure, match="node2: ray start failed"):
        watch.joined()


def test_worker_stays_until_stop_flag_or_head_lost_for_a_while() -> None:
    d = StayDecision()
    assert d.check(stop_flag=False, head_reachable=True, now=0.0, head="node1") is None
    assert d.check(stop_flag=False, head_reachable=False, now=1.0, head="node1") is None  # a blip
    assert d.check(stop_flag=False, head_reachable=True, now=1.5, head="node1") is None  # back
    assert d.check(stop_flag=False, head_reachable=False, now=2.0, head="node1") is None
    late = 2.0 + HEAD_LOST_AFTER_S + 0.1
    assert d.check(stop_flag=False, head_reachable=False, now=late, head="node1") == "Ray head on node1 unreachable"
    assert StayDecision().check(stop_flag=True, head_reachable=True, now=0.0, head="node1") == "driver ended"


def test_driver_env_points_at_the_job_cluster(tmp_path: Path) -> None:
    env = driver_env(_ctx(tmp_path), "10.0.0.1:6379", {"PYTHONPATH": "/lib", "HOME": "/h"})
    assert env["RAY_ADDRESS"] == "10.0.0.1:6379" and "SLURM_RL_RAY_ADDRESS" not in env
    assert env["PYTHONPATH"] == os.pathsep.join(["/src", "/lib"]) and env["HOME"] == "/h"


@pytest.mark.parametrize(
    ("rank", "outcome", "rc", "code", "reason", "cause"),
    [
        (0, {"rc": 0}, 0, 0, "driver exited 0", "completed"),
        (0, {"rc": 3}, 3, 3, "driver exited 3", "driver_error"),
        (0, {"rc": -9}, 137, 137, "driver killed by signal SIGKILL", "driver_killed"),
        (1, {"rc": 0}, 0, None, "", None),  # workers do not record the job's exit
        (1, {"failure": NodeFailure("ray start failed")}, 1, 1, "node2: ray start failed", "launch_failure node=node2"),
        (1, {}, STOPPED_RC, STOPPED_RC, "stopped", None),  # stopped before the role ended, by nothing it knows
    ],
)
def test_lifecycle_conclude(
    tmp_path: Path, rank: int, outcome: dict, rc: int, code: int | None, reason: str, cause: str | None
) -> None:
    life = Lifecycle(_ctx(tmp_path, rank=rank))
    assert life.conclude(outcome) == rc
    got_code, got_reason = read_exit(life.ctx.paths)
    assert got_code == code and got_reason.startswith(reason)
    got = read_cause(life.ctx.paths)
    assert (got.line() if got else None) == cause
    if code is not None:
        assert life.ctx.stop_flag.exists()  # the other nodes are told to stop


def test_a_driver_that_dies_of_a_signal_after_a_stop_names_the_stop_first(tmp_path: Path) -> None:
    """SLURM's SIGTERM at a time limit, and the driver dies of SIGSEGV in Ray's exit handlers
    (seen on the lab under load): the recorded reason says both, the stop first."""
    life = Lifecycle(_ctx(tmp_path, rank=0))
    life.ctx.stop_reason = "SIGTERM received on node1 (scancel, time limit or preemption)"
    life.ctx.signalled = True
    assert life.conclude({"rc": -11}) == 139
    assert read_exit(life.ctx.paths)[1] == (
        "SIGTERM received on node1 (scancel, time limit or preemption); driver killed by signal SIGSEGV"
    )
    assert read_cause(life.ctx.paths) == Cause("cancelled")  # SLURM's state says which stop it was


def test_a_node_that_heard_slurms_stop_is_not_lost_if_killed_before_it_said_how_it_ended(tmp_path: Path) -> None:
    """Seen on 24.11's cgroup lab, busy: node2 was killed whole, SLURM's SIGTERM reached the
    head, and SLURM's kill took the head's bootstrap before its end was written; status called
    the head lost too. A bootstrap says, once, that the stop reached it."""
    life = Lifecycle(_ctx(tmp_path, rank=0))
    for sig in (signal.SIGTERM, signal.SIGTERM, signal.SIGHUP):  # a burst: SLURM's, srun's, a forward
        life.signals.handler(sig, None)
    life.act_on_signals()
    events = read_events(life.ctx.paths.events)
    heard = [e for e in events if e["event"] == STOP_HEARD]
    assert [(e["node"], e["signal"]) for e in heard] == [("node1", "SIGTERM")]
    for node in ("node1", "node2"):
        append_event(life.ctx.paths.events, "node_start", node=node, attempt=0)
    assert lost_nodes(read_events(life.ctx.paths.events)) == ["node2"]  # it never heard anything


def test_a_stopped_worker_after_a_normal_end_is_not_a_failure(tmp_path: Path) -> None:
    life = Lifecycle(_ctx(tmp_path, rank=1))
    life.ctx.stop_flag.touch()
    assert life.conclude({}) == 0 and read_exit(life.ctx.paths) == (None, "")


def test_first_exit_wins_and_writes_are_complete(tmp_path: Path) -> None:
    paths = JobPaths(tmp_path)
    assert record_exit(paths, 1, "node2: lost")
    assert not record_exit(paths, 143, "SIGTERM received")
    assert read_exit(paths) == (1, "node2: lost")
    assert record_exit(paths, 0, "driver exited 0", keep_existing=False)
    assert read_exit(paths) == (0, "driver exited 0") and not list(tmp_path.glob(".exit*"))


def test_a_failing_setup_line_is_named_by_its_index(tmp_path: Path) -> None:
    """Run the rendered node script with a fake python: the ERR trap's line maps back to the
    setup line that failed, through the manifest alone."""
    spec = parse_spec({"cluster_name": "c", "fileroot": str(tmp_path), "setup": ["true", "echo ok", "false", "true"]})
    fake = tmp_path / "fakepy"
    fake.write_text('#!/bin/sh\necho "$@"\n')
    fake.chmod(0o755)
    opts = JobOptions(experiment=str(tmp_path / "e.py"), python=str(fake), user="u", name="n")
    job = render_job(plan_job(spec, opts))
    node_script = job.script.split("<<'SLURM_RL_NODE' || true\n")[1].split("\nSLURM_RL_NODE\n")[0]
    out = subprocess.run(
        ["bash", "-c", node_script],
        env={"SLURM_JOB_ID": "1", "PATH": os.environ["PATH"]},
        capture_output=True,
        text=True,
        timeout=10,
    ).stdout.split()
    line = int(out[out.index("--failed-setup-line") + 1])
    assert job.manifest.setup_line(line) == (2, "'false'")
    assert out[out.index("--failed-setup-rc") + 1] == "1"


def test_manifest_round_trip_and_format_check(tmp_path: Path) -> None:
    from slurm_rl.core.errors import JobError
    from slurm_rl.core.manifest import load_manifest

    path = tmp_path / "manifest.json"
    MANIFEST.write(path)
    assert load_manifest(path) == MANIFEST
    path.write_text(json.dumps({**json.loads(path.read_text()), "format": 99}))
    with pytest.raises(JobError, match="format 99"):
        load_manifest(path)
    with pytest.raises(JobError, match="does not exist"):
        load_manifest(tmp_path / "nope.json")


def test_heterogeneous_step_nodes_in_component_order() -> None:

    env = {
        "SLURM_JOB_NODELIST": "node2,node3",
        "SLURM_NODEID": "1",
        "SLURM_JOB_NODELIST_HET_GROUP_1": "node[2-3]",
        "SLURM_JOB_NODELIST_HET_GROUP_0": "node1",
    }
    assert JobEnvironment.current({**env, "SLURMD_NODENAME": "node3"}).nodes_and_rank() == (
        ["node1", "node2", "node3"],
        2,
    )
    assert JobEnvironment.current({**env, "SLURMD_NODENAME": "node1"}).nodes_and_rank() == (
        ["node1", "node2", "node3"],
        0,
    )
    assert JobEnvironment.current(
        {**{"SLURM_JOB_NODELIST": "n[1-2]", "SLURM_NODEID": "1"}, "SLURMD_NODENAME": "n2"}
    ).nodes_and_rank() == (["n1", "n2"], 1)


def test_a_cpu_head_offers_ray_nothing(tmp_path: Path) -> None:
    paths = JobPaths(tmp_path / "job")
    manifest = MANIFEST.model_copy(update={"head_node": "cpu"})
    environ = {
        "SLURM_JOB_ID": "77",
        "SLURM_NODEID": "0",
        "SLURMD_NODENAME": "node1",
        "SLURM_JOB_NODELIST": "node[1-3]",
        "SLURM_CPUS_ON_NODE": "4",
        "CUDA_VISIBLE_DEVICES": "0,1",
    }
    head = NodeContext.from_environ(environ, paths, manifest, io.StringIO())
    worker = NodeContext.from_environ(
        {**environ, "SLURM_NODEID": "1", "SLURMD_NODENAME": "node2"}, paths, manifest, io.StringIO()
    )
    assert (head.cpus, head.gpus) == (0, 0) and (worker.cpus, worker.gpus) == (4, 2)
    assert head.job_id == "job"  # the job dir's name (a hetjob component's SLURM_JOB_ID differs)


@pytest.mark.ray
@pytest.mark.parametrize(
    ("markers", "min_nodes", "timeout_s", "failure", "ready"),
    [
        ({1: "up", 2: "up"}, None, 5.0, None, True),
        ({1: "up", 2: "failed"}, None, 5.0, "node3: boom", False),
        ({1: "up"}, None, 0.2, "node3 did not join the Ray head within 0.2 s (2 of 3 nodes up)", False),
        ({1: "up"}, 2, 0.2, None, True),  # --min-nodes 2: go on without node3
    ],
)
def test_the_head_watches_joins(
    tmp_path: Path,
    gcs_address: str,
    markers: dict,
    min_nodes: int | None,
    timeout_s: float,
    failure: str | None,
    ready: bool,
) -> None:
    from slurm_rl.job.head import watch_joins

    ctx = _ctx(tmp_path)
    ctx.attempt = next(ATTEMPTS)  # its own keys in the module's GCS
    ctx.board = Board(gcs_address, ctx.attempt)
    ctx.manifest = MANIFEST.model_copy(update={"min_nodes": min_nodes, "ready_timeout_s": timeout_s})
    for rank, kind in markers.items():
        ctx.board.put(kind, f"node{rank + 1}: boom" if kind == "failed" else f"node{rank + 1}", rank=rank)
    watch_joins(ctx, {"attempt": ctx.attempt})
    assert (ctx.failure is None) if failure is None else ctx.failure.startswith(failure), ctx.failure
    assert (
        ("ready_time" in json.loads(ctx.paths.cluster.read_text())) is ready
        if ready
        else not ctx.paths.cluster.exists()
    )


def test_ray_settings_stay_ray_defaults_for_small_jobs_and_absorb_the_burst_for_large_ones() -> None:
    from slurm_rl.job.ray_start import HEALTH_CHECK_ENV, LARGE_JOB_NODES, ray_config_env

    assert ray_config_env(3) == HEALTH_CHECK_ENV  # the quick lost-node detection the lab tests
    large = ray_config_env(1000)
    assert large["RAY_gcs_server_rpc_server_thread_num"] == "62"
    assert large["RAY_health_check_timeout_ms"] == "10000"  # a busy GCS is not a dead node
    assert ray_config_env(LARGE_JOB_NODES)["RAY_gcs_server_rpc_server_thread_num"] == "4"
    assert ray_config_env(100_000)["RAY_gcs_server_rpc_server_thread_num"] == "64"


@pytest.mark.parametrize(
    ("cmdline", "name", "role"),
    [
        (["/v/bin/python", "-u", "/v/ray/_private/log_monitor.py", "--x"], "python", "log_monitor"),
        (["/v/bin/python", "/v/ray/dashboard/dashboard.py", "--host"], "python", "dashboard"),
        (["ray::DashboardAgent"], "ray::DashboardAgent", "DashboardAgent"),
        (["/v/ray/core/src/ray/raylet/raylet", "--raylet_socket_name=x"], "raylet", "raylet"),
        (["/v/bin/python", "/v/ray/_private/workers/default_worker.py", "--node-ip"], "python", "worker"),
    ],
)
def test_node_cost_names_rays_processes_and_leaves_the_jobs_workers_out(cmdline: list, name: str, role: str) -> None:
    from slurm_rl.job.context import process_role

    assert process_role(cmdline, name) == role


@pytest.mark.parametrize(
    ("mode", "source", "waits"),
    [
        ("auto", "from slurm_rl.distributed import init_ray\ninit_ray()\n", False),  # init_ray waits itself
        ("auto", "import ray\nray.init()\n", True),  # a plain Ray program (NeMo Gym)
        ("early", "import ray\nray.init()\n", False),
        ("ready", "init_ray()\n", True),
    ],
)
def test_a_driver_without_init_ray_starts_once_the_nodes_are_up(
    tmp_path: Path, mode: str, source: str, waits: bool
) -> None:
    from slurm_rl.job.head import driver_waits_for_nodes

    experiment = tmp_path / "experiment.py"
    experiment.write_text(source)
    assert driver_waits_for_nodes(mode, experiment) is waits


def test_gym_env_yaml_names_the_jobs_address(tmp_path: Path) -> None:
    import yaml  # type: ignore[import-untyped]

    from slurm_rl.job.head import write_gym_env

    paths = JobPaths(tmp_path / "7")
    paths.job_dir.mkdir()
    write_gym_env(paths, "10.77.0.11:20100")
    assert yaml.safe_load(paths.gym_env.read_text()) == {"ray_head_node_address": "10.77.0.11:20100"}


@pytest.mark.parametrize("field", ["dashboard", "ray_client"])
def test_head_services_from_the_flag_or_the_spec(tmp_path: Path, field: str) -> None:
    from tests.conftest import run_cli

    exp = tmp_path / "e.py"
    exp.write_text("print(1)\n")
    spec = tmp_path / "s.json"
    flag = "--" + field.replace("_", "-")
    for spec_value, flags, want in [(False, [], False), (False, [flag], True), (True, [], True)]:
        spec.write_text(json.dumps({"cluster_name": "c", "fileroot": str(tmp_path), field: spec_value}))
        res = run_cli("submit", str(spec), str(exp), "--nodes", "2", "--dry-run", "--json", *flags)
        assert res.returncode == 0, res.stderr
        assert json.loads(res.stdout)["manifest"][field] is want


def test_the_ray_client_proxy_starts_without_grpc_fork_handlers(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ray Client's proxy forks a server per connection from a gRPC thread; with gRPC's fork
    handlers on, that server died before its exec for up to 1 in 4 first connections. Only the proxy's
    start sees GRPC_ENABLE_FORK_SUPPORT=0; the bootstrap's own environment is left as it was."""
    import ray._private.services as services

    from slurm_rl.job import ray_start

    seen: list[str | None] = []
    monkeypatch.setattr(
        services, "start_ray_client_server", lambda *a, **k: seen.append(os.environ.get("GRPC_ENABLE_FORK_SUPPORT"))
    )
    monkeypatch.setenv("GRPC_ENABLE_FORK_SUPPORT", "1")
    ray_start._client_proxy_without_grpc_fork_handlers()
    ray_start._client_proxy_without_grpc_fork_handlers()  # twice: wrapped once
    services.start_ray_client_server("gcs:1", "10.0.0.1", 20001)
    assert seen == ["0"] and os.environ["GRPC_ENABLE_FORK_SUPPORT"] == "1"


def test_a_read_only_home_gets_matplotlib_a_cache_dir_in_the_job(tmp_path, monkeypatch) -> None:
    """In a container without the home mounted, plotting must not warn and rebuild its font cache
    in every process: MPLCONFIGDIR goes to the job's node-local dir; a writable home or the
    user's own MPLCONFIGDIR is left alone."""
    import os

    from slurm_rl.job import node

    home = tmp_path / "home"
    home.mkdir()  # no .config yet: its nearest existing parent decides
    assert node.config_dir_env({"HOME": str(home)}, "/tmp/srl-1") == {}
    assert node.config_dir_env({"HOME": str(home), "MPLCONFIGDIR": "/mine"}, "/tmp/srl-1") == {}
    # a read-only file system (root ignores permission bits, so EROFS is what a container shows)
    real_access = os.access
    monkeypatch.setattr(node.os, "access", lambda p, mode: not str(p).startswith(str(home)) and real_access(p, mode))
    assert node.config_dir_env({"HOME": str(home)}, "/tmp/srl-1") == {"MPLCONFIGDIR": "/tmp/srl-1/matplotlib"}


# A node's bootstrap in a process of its own (argv[1]: its dir; the node log is node.log there)
NODE_CHILD = """
import io, signal, subprocess, sys, time
from pathlib import Path
import slurm_rl.job.node_lifecycle as lifecycle
from slurm_rl.core.paths import JobPaths
from slurm_rl.job.context import NodeContext
from tests.unit.test_job_roles import MANIFEST

paths = JobPaths(Path(sys.argv[1]) / "77")
paths.markers.mkdir(parents=True)
env = {"SLURM_JOB_ID": "77", "SLURM_NODEID": "_R_", "SLURMD_NODENAME": "_N_", "SLURM_JOB_NODELIST": "node[1-3]"}
log = open(Path(sys.argv[1]) / "node.log", "a", buffering=1)
ctx = NodeContext.from_environ(env, paths, MANIFEST, log)
"""


def node_child(rank: int, body: str) -> str:
    return NODE_CHILD.replace("_R_", str(rank)).replace("_N_", f"node{rank + 1}") + body


BURST_CHILD = node_child(
    1,
    """
lifecycle.Lifecycle.run_role = lambda self: self.ctx.wait_until(lambda: False, 120, "the stop")  # a worker's stay
life = lifecycle.Lifecycle(ctx)
for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGCONT):
    signal.signal(sig, life.signals.handler)
print("running", flush=True)
print("exit", life.run(), flush=True)
""",
)


def test_a_burst_of_signals_never_wedges_the_node_bootstrap(tmp_path: Path) -> None:
    """Seen in CI at a time limit in an Apptainer job: SLURM's SIGTERM, Apptainer's forward of it
    and srun's came together; Python ran the second handler inside the first, which held the
    stop Event's lock, and the bootstrap waited for itself until SLURM killed it, before its
    cleanup (its temp dir stayed). Thousands of signals at once: the node still stops, says
    why, and its cleanup runs."""
    import signal
    import time

    child = subprocess.Popen(
        [sys.executable, "-c", BURST_CHILD, str(tmp_path)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert child.stdout is not None and child.stdout.readline().strip() == "running"
    end = time.monotonic() + 3
    while time.monotonic() < end and child.poll() is None:
        for _ in range(200):
            try:
                os.kill(child.pid, signal.SIGTERM)
            except ProcessLookupError:
                break
    try:
        out, _ = child.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        child.kill()
        pytest.fail("the bootstrap wedged in its signal handler")
    assert out.strip() == f"exit {STOPPED_RC}"
    log = (tmp_path / "node.log").read_text()
    assert log.count("received SIGTERM") == 1 and "cleanup: stopped" in log, log  # one stop, said once
    assert read_exit(JobPaths(tmp_path / "77")) == (
        STOPPED_RC,
        "SIGTERM received on node2 (scancel, time limit or preemption)",
    )


def test_a_node_removes_the_temp_dirs_of_its_users_ended_jobs_and_never_on_doubt(tmp_path: Path) -> None:
    """Found by the soak: a node that failed while jobs ran came back with their temp dirs (Ray's
    sessions), and nothing of those jobs ran there again to remove them. The next job's bootstrap
    there removes a dir when SLURM no longer runs its job on the node and no process of it is
    here; it keeps its own, a running job's, one whose job has a process here, and every dir
    when SLURM does not answer."""
    from slurm_rl.job.stale_dirs import remove_stale_dirs, stale_dirs

    for name in ("srl-101", "srl-102", "srl-103_4", "srl-200", "other"):
        (tmp_path / name / "session_latest").mkdir(parents=True)
    busy = subprocess.Popen(["sleep", "60"], env={"SLURM_RL_JOB_ID": "103_4"})  # a process of job 103_4
    try:
        asked = []

        def here() -> set[str]:
            asked.append(1)
            return {"102", "200"}  # SLURM runs 102 (and us, 200) on this node

        found = stale_dirs(str(tmp_path), "200", here)
        assert found == [str(tmp_path / "srl-101")] and asked == [1]
        assert stale_dirs(str(tmp_path), "200", lambda: None) == []  # SLURM did not answer: keep all
        said: list[str] = []
        import slurm_rl.job.stale_dirs as mod

        real = mod.slurm_jobs_on
        mod.slurm_jobs_on = lambda node: here  # type: ignore[assignment]
        try:
            assert remove_stale_dirs(str(tmp_path), "200", "node2", said.append) == [str(tmp_path / "srl-101")]
        finally:
            mod.slurm_jobs_on = real
        assert sorted(p.name for p in tmp_path.iterdir()) == ["other", "srl-102", "srl-103_4", "srl-200"]
        assert said and "srl-101: its job no longer runs on node2" in said[0]
    finally:
        busy.kill()
        busy.wait()
    assert stale_dirs(str(tmp_path / "srl-200"), "200", lambda: set()) == []  # nothing to ask about: no SLURM call


def test_node_0_records_the_oom_under_a_drivers_failure_as_its_cause(tmp_path: Path) -> None:
    """As status reads it (core/ending.py), so finalize's --retry-on oom sees the same cause."""
    life = Lifecycle(_ctx(tmp_path, rank=0))
    append_event(life.ctx.paths.events, "node_oom", node="node3", kills=1, limit="1500 MiB (--mem)")
    assert life.conclude({"rc": 1}) == 1
    assert read_cause(life.ctx.paths) == Cause("oom", "node3")
