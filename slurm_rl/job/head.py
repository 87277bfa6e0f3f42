"""Node 0's role: start the Ray head and, at once, the driver with ``RAY_ADDRESS`` set (the other
nodes join while the driver imports its libraries; ``init_ray()`` waits, with a deadline, for
the nodes the job needs); return the driver's exit code. A watcher records ``ready`` when the
nodes are up and fails the job fast, naming the node, when one fails or never joins."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import threading
import time
from pathlib import Path

from ..core import causes as c
from ..core.causes import Cause
from ..core.events import write_atomic, write_json
from ..core.job_env import RAY_ADDRESS_ENV, RAY_SYSTEM_CONFIG, RUN_DIR_ENV, JobEnvironment
from ..core.job_ids import as_slurm_id
from ..core.paths import JobPaths
from .attempt_start import begin_attempt
from .board import Board, BoardUnreachable
from .conclusion import named_node
from .context import NodeContext, NodeFailure
from .member_watch import MemberWatch
from .node_checks import preflight_passed
from .preflight_replace import leaving
from .service_watch import ServiceWatch
from .warning_relay import relay_warning

FILE_POLL_S = 1.0  # failed markers of nodes that could not reach the GCS: a slow fallback
HEAD_ANNOUNCE_TIMEOUT_S = 60.0


class JoinWatch:
    """Which worker nodes joined (their ``up`` key in the head's GCS) or failed (a ``failed`` key,
    or, from a node that never reached the GCS, its marker file: read once a second)."""

    def __init__(self, ctx: NodeContext, board: Board) -> None:
        self.ctx = ctx
        self.board = board
        self._next_file_check = 0.0

    def joined(self) -> set[int]:
        """Ranks of the worker nodes up; NodeFailure naming the first that failed instead."""
        failed = self.board.by_rank("failed")
        if failed:
            raise NodeFailure(failed[min(failed)])
        now = time.monotonic()
        if now >= self._next_file_check:
            self._next_file_check = now + FILE_POLL_S
            markers = self.ctx.paths.node_markers(self.ctx.attempt, "failed")
            if markers:
                raise NodeFailure(markers[0].read_text().strip())
        return set(self.board.by_rank("up"))

    def missing(self, up: set[int]) -> list[str]:
        return [node for rank, node in enumerate(self.ctx.nodes) if rank > 0 and rank not in up]


def watch_joins(ctx: NodeContext, cluster: dict[str, object]) -> None:
    """Background, while the driver starts: ``ready`` once ``min_nodes`` are up; the job fails
    at once when a node fails, or when fewer than ``min_nodes`` joined by the ready timeout."""
    assert ctx.board is not None
    watch = JoinWatch(ctx, ctx.board)
    need = ctx.manifest.min_nodes or len(ctx.nodes)
    deadline = time.monotonic() + ctx.manifest.ready_timeout_s
    announced = False
    joined: set[int] = set()
    while not ctx.stop_requested.is_set():
        try:
            joined = watch.joined()
        except NodeFailure as exc:  # "node2: ...": that node's own failure
            ctx.fail(str(exc), Cause(c.LAUNCH_FAILURE, named_node(str(exc), ctx.nodes, "")))
            return
        except BoardUnreachable:  # our own GCS: busy; try again
            pass
        up = 1 + len(joined)
        if up >= need and not announced:
            write_json(ctx.paths.cluster, {**cluster, "ready_time": time.time()})
            ctx.event("ready", nodes=up)
            ctx.ready.set()
            announced = True
        if up >= len(ctx.nodes):
            return
        missing = watch.missing(joined) if time.monotonic() > deadline else []
        if missing and set(missing) <= set(leaving(ctx) or ()):
            deadline = time.monotonic() + 1  # leaving (preflight found them bad): --heal-timeout times them
        elif missing:
            late = ", ".join(missing)
            if not announced:
                ctx.fail(
                    f"{late} did not join the Ray head within {ctx.manifest.ready_timeout_s:g} s "
                    f"({up} of {need} nodes up); see `slurm-rl logs {ctx.job_id} --node NODE`",
                    Cause(c.LAUNCH_FAILURE, late.split(", ")[0]),
                )
            else:
                ctx.say(f"going on without {late} (--min-nodes {need})")
            return
        time.sleep(0.1)


def run_head(ctx: NodeContext) -> int:
    begin_attempt(ctx)  # a retry --retry-on does not allow ends here, before Ray starts
    if ctx.failure:
        return 1
    head_ip = ctx.ip
    ports = ctx.ports  # picked free now; the GCS port is published before Ray starts, so that
    address = f"{head_ip}:{ports.gcs}"  # the other nodes join the moment it answers
    cluster = {
        "job_id": as_slurm_id(ctx.job_id),
        "head_node": ctx.node,
        "head_ip": head_ip,
        "network_interface": ctx.address.interface,  # null: the address the node's name resolves to
        "address": address,
        # Ray Client (--ray-client): drivers off the job's nodes, with the job's token
        "client_address": f"ray://{head_ip}:{ports.ray_client_server}" if ports.ray_client_server else None,
        "ports": ports.as_dict(),
        "nodes": ctx.nodes,
        "temp_dir": ctx.temp_dir,
        "open_files": resource.getrlimit(resource.RLIMIT_NOFILE)[0],  # raised to the hard limit
        "attempt": ctx.attempt,
        "ready_time": None,
    }
    write_json(ctx.paths.cluster, cluster)
    # Ray's dashboard on the head's address when asked for, or interactive (`attach --dashboard`)
    dashboard = [f"--include-dashboard={str(ctx.manifest.wants_dashboard).lower()}", f"--dashboard-host={head_ip}"]
    # Ray's monitor stays: it is what `ray status` (attach -- ray status) reads; one process, head only
    client = [f"--ray-client-server-port={ports.ray_client_server}"] if ports.ray_client_server else []
    # a second start replaces the GCS: safe, since the other nodes join only once the head says
    # it is up (its board's ``head`` key, written here after `ray start` returned)
    head_args = ["--head", f"--port={ports.gcs}", f"--dashboard-port={ports.dashboard}", *dashboard, *client]
    head_args.append(f"--system-config={json.dumps(RAY_SYSTEM_CONFIG)}")  # the other nodes take it from the GCS
    ctx.ray_start(head_args, retry=True)
    ctx.board = Board(address, ctx.attempt)
    announce_head(ctx, ctx.board)
    ctx.event("node_up", address=address, **ctx.ray_node_cost())
    threading.Thread(target=watch_joins, args=(ctx, cluster), name="joins", daemon=True).start()
    # members come and go (grow, shrink), lost worker nodes are replaced with --heal (member_watch.py)
    members = MemberWatch(ctx, address)
    threading.Thread(target=members.run, name="members", daemon=True).start()
    write_gym_env(ctx.paths, address)
    start_services_view(ctx, head_ip)
    if ctx.manifest.preflight and not preflight_passed(ctx, members):
        return 1
    if ctx.manifest.interactive:  # no driver: up until teardown, scancel or the time limit
        off_nodes = f"; off its nodes: `slurm-rl attach {ctx.job_id} --client` ({cluster['client_address']})"
        ctx.say(
            f"interactive cluster up at {address}; `slurm-rl attach {ctx.job_id}` to use it"
            + (off_nodes if cluster["client_address"] else "")
        )
        ctx.wait_until(lambda: False, float("inf"), "teardown, scancel or the time limit")
    if driver_waits_for_nodes(ctx.manifest.driver_start, ctx.paths.experiment):
        ctx.say("starting the driver once the nodes are up (it does not call init_ray; --driver-start early to change)")
        ctx.wait_until(ctx.ready.is_set, float("inf"), "the job's nodes (the ready timeout fails the job)")
    return run_driver(ctx, address)


def announce_head(ctx: NodeContext, board: Board) -> None:
    """Tell the other nodes that this head's Ray is up (they join only then); its own GCS, just
    started, is asked again while it is too busy to answer."""
    ctx.wait_until(
        lambda: board.put("head", ctx.node), HEAD_ANNOUNCE_TIMEOUT_S, "the head's own GCS to take its `head` key"
    )


def driver_waits_for_nodes(driver_start: str, experiment: Path) -> bool:
    """Whether the driver starts only once the nodes are up. ``init_ray()`` waits for them
    itself, so a driver that calls it starts with the head and imports its libraries while the
    nodes join; any other Ray program (``ray.init()``, NeMo Gym) would see only the nodes that had
    joined when it connected."""
    if driver_start != "auto":
        return driver_start == "ready"
    try:
        return "init_ray" not in experiment.read_text(errors="replace")
    except OSError:
        return False


def write_gym_env(paths: JobPaths, address: str) -> None:
    """``gym_env.yaml`` in the job dir: the job's Ray address where NeMo Gym reads it
    (``ng_run "+config_paths=[<job dir>/gym_env.yaml]"`` on a node of the job)."""
    write_atomic(paths.gym_env, f'ray_head_node_address: "{address}"\n')


def driver_env(ctx: NodeContext, address: str, environ: dict[str, str]) -> dict[str, str]:
    env = dict(environ)
    env[RAY_ADDRESS_ENV] = address
    job_dir = ctx.paths.job_dir
    env[RUN_DIR_ENV] = ctx.manifest.run_dir or str(job_dir)  # a chain's shared dir, else the job dir
    src_dir = ctx.manifest.in_snapshot(ctx.manifest.experiment_src_dir, job_dir)
    snapshot = str(job_dir / "code") if ctx.manifest.snapshot_root else ""
    # imports next to the experiment (and, with --snapshot, from the repository's top) keep working
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [src_dir, snapshot, env.get("PYTHONPATH")]))
    return env


def start_services_view(ctx: NodeContext, head_ip: str) -> None:
    """A job of parts with services: a balancer per service on the head, then the wait for the
    required ones (Ray's nodes join meanwhile); the driver's ``{NAME.url}`` become their URLs."""
    watch = ServiceWatch(ctx)
    if not watch.expected:
        return
    from .balancer import start_balancers

    try:
        ctx.service_urls = start_balancers(ctx.paths.services, sorted(watch.expected), ctx.attempt, head_ip)
    except RuntimeError as exc:
        raise NodeFailure(str(exc)) from None
    ctx.say(f"service balancers: {ctx.service_urls}")
    watch.wait_ready()


def driver_argv(ctx: NodeContext) -> list[str]:
    """The experiment's copy in the job dir, or in its snapshot (where its neighbours are too);
    ``{NAME.url}`` in its arguments is service NAME's URL (as NeMo RL's launchers substitute)."""
    experiment = str(ctx.paths.experiment)
    if ctx.manifest.snapshot_root:
        experiment = ctx.manifest.in_snapshot(ctx.manifest.experiment, ctx.paths.job_dir)
    args = list(ctx.manifest.experiment_args)
    for name, url in ctx.service_urls.items():
        args = [a.replace(f"{{{name}.url}}", url) for a in args]
    return [sys.executable, experiment, *args]


def run_driver(ctx: NodeContext, address: str) -> int:
    # "": the job dir (container jobs); a directory inside a snapshotted repository: its copy
    workdir = ctx.manifest.in_snapshot(ctx.manifest.workdir, ctx.paths.job_dir) or str(ctx.paths.job_dir)
    if not os.path.isdir(workdir):  # e.g. submitted from the login node's /tmp, which no node has
        raise NodeFailure(
            f"the working directory {workdir} does not exist on {ctx.node}; submit from a directory the nodes "
            f"share (your home, or under the fileroot {ctx.paths.name_dir.parent.parent}), or pass --workdir DIR"
        )
    argv = driver_argv(ctx)
    ctx.event("driver_start", argv=argv)
    with open(ctx.paths.driver_log, "ab") as out:
        # SLURM delivers step signals to every process of the step (proctrack), the driver
        # included; SIGUSR2 arrives ignored (inherited from us) unless on_preempt hooks it
        with ctx.spawns.starting("the driver"):  # cleanup stops it, or it never starts
            ctx.driver = subprocess.Popen(
                argv,
                cwd=workdir,
                env=driver_env(ctx, address, dict(os.environ)),
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        if ctx.stop_requested.is_set():
            ctx.driver.terminate()
        if JobEnvironment.current().component_nodes():  # a het job's step did not forward it (warning_relay.py)
            threading.Thread(target=relay_warning, args=(ctx, ctx.driver), name="warning", daemon=True).start()
        rc = ctx.driver.wait()
    ctx.event("driver_end", exit_code=rc)
    return rc
