"""Ray's `ray start`, run inside the node bootstrap, minus what a batch job never uses.

Ray's CLI starts a Ray Client server on the head whenever its dependencies are importable, and
offers no flag to turn it off (port 0 is rejected). A slurm-rl driver runs inside the job and
connects to the GCS directly, so the client server is only a process competing for the node's
CPUs during bring-up: it runs only for ``--ray-client`` (drivers off the job's nodes), started
so that its per-client servers survive their fork. Nor does the bootstrap import the CLI's
other command groups (`ray list/get/summary/logs`, `ray job`, `ray serve`): Ray's CLI skips
each one it cannot import, as on a minimal install, and `ray start` uses none of them (~0.4
CPU-s less per node, measured). Workers with a runtime_env start through slurm-rl's light setup
script instead of Ray's (distributed/worker_env/setup_worker.py), and without the dashboard
the dashboard agent minimal (distributed/worker_env/lean_node.py); Ray's log monitor and autoscaler monitor run
as threads of the bootstrap (job/ray_threads.py). Everything else is the unmodified `ray start`.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .spawn_gate import SpawnGate

GRPC_FORK_ENV = "GRPC_ENABLE_FORK_SUPPORT"

# Ray's GCS declares a node dead after `failure_threshold` failed health checks `period_ms` apart
# (defaults 5 x 3 s, each waiting up to 10 s). A job's nodes sit on one fast network: 5 x 2 s,
# 2 s each, so a lost node's actors fail their callers within about NODE_LOST_WINDOW_S.
HEALTH_CHECK_ENV = {
    "RAY_health_check_period_ms": "2000",
    "RAY_health_check_timeout_ms": "2000",
    "RAY_health_check_failure_threshold": "5",
}
NODE_LOST_WINDOW_S = 20
LARGE_JOB_NODES = 64  # from here on the GCS is tuned for the registration burst (ray_config_env)


def ray_config_env(nodes: int) -> dict[str, str]:
    """Ray's settings (``RAY_<config>`` variables, read by the GCS and every raylet) for a job of
    ``nodes`` nodes. Up to LARGE_JOB_NODES, Ray's defaults except the quick health check above.

    From LARGE_JOB_NODES on, what large RL jobs need at the start, when every node registers and
    then thousands of workers register at once against the one GCS (NeMo RL measured workers
    timing out of registration and raylets killing them, NVIDIA-NeMo/RL#3089/#3158):
    - the GCS serves gRPC on one thread per 16 nodes (Ray's default 1), at most 64;
    - registration and GCS request timeouts 120 s instead of 30-60 s, so a burst is waited out;
    - the health check Ray's default (10 s timeout, 3 s apart, 5 misses: a lost node is declared
      after ~65 s) instead of 2 s, so a busy GCS is not mistaken for dead nodes;
    - resource reports every 500 ms (not 100) and task events every 5 s (not 1): the background
      load on the GCS grows with nodes x rate.
    The user's own ``RAY_*`` variables win (the bootstrap only sets what is unset)."""
    env = dict(HEALTH_CHECK_ENV)
    if nodes < LARGE_JOB_NODES:
        return env
    env.update(
        {
            "RAY_health_check_period_ms": "3000",
            "RAY_health_check_timeout_ms": "10000",
            "RAY_health_check_failure_threshold": "5",
            "RAY_gcs_server_rpc_server_thread_num": str(min(64, max(1, nodes // 16))),
            "RAY_worker_register_timeout_seconds": "120",
            "RAY_gcs_server_request_timeout_seconds": "120",
            "RAY_gcs_rpc_server_connect_timeout_s": "120",
            "RAY_raylet_report_resources_period_milliseconds": "500",
            "RAY_task_events_report_interval_ms": "5000",
        }
    )
    return env


def start_in_process(argv: list[str], dashboard: bool = False, spawns: SpawnGate | None = None) -> None:
    """Run `ray start ARGV` in this process; raises on failure instead of exiting.

    Without the dashboard, the node starts lean (distributed/worker_env/lean_node.py): the head
    starts no dashboard process (without the dashboard it would serve only Ray's job-submission
    and state APIs, which a slurm-rl job does not use; ``--dashboard`` brings both back) and every
    node's dashboard agent loads only what a minimal Ray has."""
    from ..distributed.worker_env.lean_node import without_dashboard
    from ..distributed.worker_env.setup_worker import use_light_setup_worker
    from . import ray_threads

    use_light_setup_worker()
    ray_threads.run_in_this_process()
    with _without_cli_groups():
        from ray.scripts import scripts

    if any(a.startswith("--ray-client-server-port") for a in argv):
        _client_proxy_without_grpc_fork_handlers()
    else:
        scripts.get_ray_client_dependency_error = lambda: "disabled by slurm-rl"  # type: ignore[assignment,return-value]
    with contextlib.nullcontext() if dashboard else without_dashboard(), _gated_spawns(spawns):
        scripts.start.main(args=argv, prog_name="ray start", standalone_mode=False)


@contextlib.contextmanager
def _gated_spawns(spawns: SpawnGate | None) -> Iterator[None]:
    """Each daemon `ray start` spawns (GCS, raylet, ...) holds the node's spawn gate while it
    spawns (spawn_gate.py): once cleanup has closed it, the next one raises instead."""
    from ray._private import services

    if spawns is None:
        yield
        return
    spawn = services.start_ray_process

    def gated(command: list[str], process_type: str, *args: Any, **kw: Any) -> Any:
        with spawns.starting(f"Ray's {process_type}"):
            return spawn(command, process_type, *args, **kw)

    services.start_ray_process = gated  # services.py calls it by its global name
    try:
        yield
    finally:
        services.start_ray_process = spawn


# Command groups that Ray's CLI module registers only when it can import them (ray/scripts/scripts.py
# wraps each import in try/except); `ray start` needs none of them.
CLI_GROUPS = ("ray.util.state.state_cli", "ray.dashboard.modules.job.cli", "ray.serve.scripts")


@contextlib.contextmanager
def _without_cli_groups() -> Iterator[None]:
    """While Ray's CLI module is first imported, its optional command groups cannot be (a None
    in sys.modules raises ImportError); afterwards they import as usual."""
    blocked = [m for m in CLI_GROUPS if m not in sys.modules]
    sys.modules.update(dict.fromkeys(blocked))  # type: ignore[arg-type]  # None: "cannot import"
    try:
        yield
    finally:
        for m in blocked:
            if sys.modules.get(m, ...) is None:
                del sys.modules[m]


# a fatal line of raylet.out: "[2026-11-26 19:02:35,575 C 699 699] (raylet) node_manager.cc:3576: ..."
_FATAL = re.compile(r"^\[\S+ \S+ C \d+ \d+\] \(raylet\) [\w./-]+:\d+:\s*(.*)$")


def agents_were_late(why: str | None) -> bool:
    """Whether the raylet aborted because its agents (dashboard agent, runtime-env agent) did not
    write their port files within its fixed wait (Ray 2.60: 15 s; no setting lengthens it, and
    pinning the agents' ports does not skip it): their Python start-up on an overloaded node. A
    node's CPU is shared by every process starting there, so a second start usually makes it."""
    return why is not None and "Timed out waiting for file" in why


def raylet_fatal(session_logs: Path) -> str | None:
    """What the node's raylet died of, from its own log, or None. `ray start` reports only "The
    current node timed out during startup" when its raylet aborts; the reason is in raylet.out
    (e.g. its fixed wait for the dashboard agent's port file ran out on an overloaded node)."""
    try:
        lines = (session_logs / "raylet.out").read_text(errors="replace").splitlines()
    except OSError:
        return None
    for line in reversed(lines):
        m = _FATAL.match(line)
        if m:
            why = m.group(1)
            checked = re.search(r"Check failed: \S+ (.+)", why)
            return (checked.group(1) if checked else why).strip()[:300]
    return None


def _client_proxy_without_grpc_fork_handlers() -> None:
    """Ray Client's proxy starts with GRPC_ENABLE_FORK_SUPPORT=0.

    The proxy forks one server per client connection from a gRPC handler thread (a Python
    ``preexec_fn``, so the fork runs gRPC's fork handlers while its other threads are busy:
    "Other threads are currently calling into gRPC, skipping fork() handlers"), and the new
    server can die before it execs: the client fails after 30-40 s ("Starting Ray client server
    failed", or the proxy's own psutil.ZombieProcess). Measured on this Ray, first connections to
    fresh heads: 8 of 30 failed on the host and 2 of 14 lab jobs on a busy machine; with gRPC's
    fork support off for the proxy, 0 of 16 and 0 of 14 (the proxy does not need it: its child
    execs a new Python at once).
    Only the proxy and its servers get the setting, not the node's other daemons or workers."""
    import ray._private.services as services

    start = services.start_ray_client_server
    if getattr(start, "slurm_rl_patched", False):
        return

    def start_without_fork_handlers(*args: Any, **kwargs: Any) -> Any:
        before = os.environ.get(GRPC_FORK_ENV)
        os.environ[GRPC_FORK_ENV] = "0"  # the proxy's environment is copied from ours at Popen
        try:
            return start(*args, **kwargs)
        finally:
            if before is None:
                os.environ.pop(GRPC_FORK_ENV, None)
            else:
                os.environ[GRPC_FORK_ENV] = before

    start_without_fork_handlers.slurm_rl_patched = True  # type: ignore[attr-defined]
    services.start_ray_client_server = start_without_fork_handlers


# Ray's defaults: 30% of the node's available memory, at most 200 GB, at least 75 MiB.
OBJECT_STORE_PROPORTION = 0.3
OBJECT_STORE_MAX = 200 * 10**9
OBJECT_STORE_MIN = 75 * 2**20


def object_store_size(available_memory: int, shm_free: int) -> tuple[int, str | None]:
    """(bytes for --object-store-memory, a warning or None). Ray's own default, but never more
    than 95% of the free ``/dev/shm``: where /dev/shm is small (containers, where the runtime
    sets it), Ray would otherwise put the store in its temp dir on disk, or fail to allocate."""
    default = min(int(available_memory * OBJECT_STORE_PROPORTION), OBJECT_STORE_MAX)
    fits = int(shm_free * 0.95)
    if fits >= default:
        return max(default, OBJECT_STORE_MIN), None
    size = max(fits, OBJECT_STORE_MIN)
    mib = 2**20
    return size, (
        f"/dev/shm has {shm_free // mib} MiB free, less than the {default // mib} MiB object store Ray would use: "
        f"the object store is {size // mib} MiB (objects beyond it spill to disk); ask for a larger /dev/shm "
        f"(e.g. a site's enroot/apptainer shm setting) if the job moves large tensors through Ray"
    )
