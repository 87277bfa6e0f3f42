"""A node's job lifecycle around its role (head.py, worker.py): the role runs in a thread so
that a stop (signal, failed node, the driver's end) is acted on at once, even while `ray
start` is blocked in C code; then the exit is recorded (once, by the first node to know) and
the node cleaned (node_cleanup.py)."""

from __future__ import annotations

import os
import resource
import signal
import threading
import time

from ..core import causes as c
from ..core.causes import Cause
from ..core.ending import cause_from_reason
from ..core.events import write_atomic
from ..core.exits import OomKills, RayDeath
from ..core.job_dir import STOP_HEARD
from ..core.job_env import MEMBER_RANK_BASE, JobEnvironment
from ..core.option_rules import duration_seconds
from ..core.stacks import STACKS_DIR_ENV, nccl_evidence_env
from .conclusion import conclude
from .context import POLL_S, NodeContext, NodeFailure, Stopped, describe_error
from .end_time_watch import EndTimeWatch
from .memory import OomWatch, warn_driver, warn_driver_line
from .network import socket_ifname_env
from .node_checks import NodePreflight
from .node_cleanup import clean_node
from .parts_role import run_node_role
from .preflight_replace import LEAVING, LeaveWatch, wait_replaced
from .progress_watch import OutputWatch
from .ray_watch import RayWatch
from .service_watch import ServiceWatch
from .signal_inbox import SignalInbox
from .stacks_watch import StacksWatch
from .stall_watch import StallWatch
from .worker import PRE_JOIN_FILE_POLL_S

DRIVER_GRACE_S = 2.0  # a signalled driver gets this long to exit (checkpoint) before the kill


class Lifecycle:
    """Runs this node's role in a thread so that a stop (signal, failed node) is acted on at
    once, even while `ray start` is blocked in C code; then records the exit and cleans up."""

    def __init__(self, ctx: NodeContext, failed_setup: tuple[int, int] | None = None) -> None:
        self.ctx = ctx
        self.failed_setup = failed_setup
        self._stop_seen_at: float | None = None
        self._stop_heard = False
        self.failed_by = ""  # why node 0 ended the job as failed: a stall (--stall-action fail), Ray's death
        self.failed_cause: Cause | None = None  # ... its cause (core/causes.py)
        self.signals = SignalInbox()  # node.py installs its handler
        self.replaced = False  # node 0 told this node to leave: preflight found it bad (--heal)

    def act_on_signals(self) -> None:
        ctx = self.ctx  # what the handler noted (signal_inbox.py): the stop, its line, the driver's copy
        for sig in self.signals.take():
            if not ctx.stop_requested.is_set():
                ctx.stop_reason = f"{sig.name} received on {ctx.node} (scancel, time limit or preemption)"
                ctx.signalled = True
            if not self._stop_heard:  # alive when SLURM's stop came: never a lost node (core/job_dir.py)
                self._stop_heard = True
                ctx.event(STOP_HEARD, signal=sig.name)
            ctx.stop_requested.set()
            ctx.say(f"received {sig.name}")
            if ctx.driver is not None and ctx.driver.poll() is None:
                try:
                    ctx.driver.send_signal(sig)
                except ProcessLookupError:
                    pass

    def run_role(self) -> int:
        """Node 0: head + driver, returns the driver's exit code. Others: join, wait for stop."""
        ctx = self.ctx
        if self.failed_setup is not None:
            line, rc = self.failed_setup
            index, text = ctx.manifest.setup_line(line)
            raise NodeFailure(
                f"setup[{index}] {text} exited {rc} (spec field 'setup'; its output is in {ctx.paths.batch_log})"
            )
        # the batch script forwards SLURM's warning signal once every node has started
        write_atomic(ctx.paths.node_marker(ctx.attempt, ctx.rank, "started"), ctx.node + "\n")
        # every Python process of the job on this node arms its stack dump here (core/stacks.py)
        os.environ[STACKS_DIR_ENV] = self.stacks_dir
        for name, value in nccl_evidence_env(ctx.paths.job_dir).items():  # a hung NCCL collective's record
            os.environ.setdefault(name, value)
        if ctx.gpus:
            (ctx.paths.job_dir / "nccl").mkdir(exist_ok=True)
        # NCCL and gloo on the interface the spec chose (Ray, the driver and workers inherit them)
        chosen = socket_ifname_env(ctx.address, dict(os.environ))
        os.environ.update(chosen)
        if chosen:
            ctx.say(
                f"network: {ctx.ip} on {ctx.address.interface}; set {', '.join(f'{k}={v}' for k, v in chosen.items())}"
            )
        if ctx.manifest.preflight and ctx.rank < MEMBER_RANK_BASE:  # beside Ray's bring-up (head.py waits),
            NodePreflight(ctx).start()  # before this node writes into its temp dir (a full one is a finding)
        if ctx.gpus:  # where each GPU's CPUs are, for workers that bind to them (numa_utils)
            from ..distributed.numa_utils import AFFINITY_FILE_NAME, write_affinity_file

            os.makedirs(ctx.temp_dir, exist_ok=True)
            found = write_affinity_file(os.path.join(ctx.temp_dir, AFFINITY_FILE_NAME))
            ctx.say(f"GPU NUMA affinity: {found} GPU(s) mapped" if found else "GPU NUMA affinity: not available here")
        # pid: `slurm-rl attach` joins this process's container (enroot exec PID)
        ctx.event(
            "node_start",
            ip=ctx.ip,
            interface=ctx.address.interface,
            cpus=ctx.cpus,
            gpus=ctx.gpus,
            pid=os.getpid(),
            open_files=resource.getrlimit(resource.RLIMIT_NOFILE)[0],
        )
        return run_node_role(ctx)

    def run(self) -> int:
        ctx = self.ctx
        done = threading.Event()
        outcome: dict[str, object] = {}

        def target() -> None:
            try:
                outcome["rc"] = self.run_role()
            except NodeFailure as exc:
                outcome["failure"] = exc
            except Stopped:
                pass
            except BaseException as exc:  # noqa: BLE001 - reported, then the node stops
                outcome["failure"] = NodeFailure(f"unexpected error in the bootstrap: {describe_error(exc)}")
            finally:
                done.set()

        threading.Thread(target=target, name="role", daemon=True).start()
        oom = OomWatch(ctx.memory_limit)

        def note_oom(now: bool = False) -> None:
            found = oom.poll(now)
            if found:
                kills = OomKills(ctx.node, *found)
                ctx.say(f"OOM: {kills.text()}")
                ctx.event("node_oom", message=kills.text(), kills=kills.kills, limit=kills.limit)
                warn_driver(ctx.paths.driver_log, kills)

        next_flag_check = 0.0
        slurm_job = JobEnvironment.current().job_id  # its own id (an array task's too)
        ends = EndTimeWatch(slurm_job, ctx.paths) if ctx.rank == 0 and slurm_job else None  # node 0 of the job
        output = OutputWatch(ctx.paths.driver_log, ctx.paths.job_dir) if ctx.rank == 0 else None
        stacks = StacksWatch(ctx, self.stacks_dir)
        stall = self.stall_watch()
        services = ServiceWatch(ctx) if ctx.rank == 0 else None  # a required service past its restarts
        ray = RayWatch()
        leave = LeaveWatch(ctx)
        while not done.wait(POLL_S):
            if leave.told():
                self.replaced = True
                ctx.stop_reason = LEAVING
                ctx.stop_requested.set()
            self.act_on_signals()
            note_oom()
            stacks.poll()
            if stall is not None and not ctx.stop_requested.is_set():
                self.stop_failed(stall.poll(), Cause(c.STALLED))
            if services is not None and not ctx.stop_requested.is_set():
                failed = services.poll()  # "service NAME failed on NODE: ..."
                self.stop_failed(failed, cause_from_reason(1, failed or ""))
            if ends is not None and not ctx.stop_requested.is_set():
                ends.poll()
            if output is not None:
                output.poll()
            self.note_ray_deaths(ray)
            if ctx.rank != 0 and ctx.board is None and not ctx.stop_requested.is_set():
                # node 0 may be done before this node joined, while `ray start` is still blocked
                # retrying a head that is gone; once joined, the role asks the head's GCS instead
                now = time.monotonic()
                if now >= next_flag_check:
                    next_flag_check = now + PRE_JOIN_FILE_POLL_S
                    if ctx.stop_flag.exists():
                        ctx.stop_reason = ctx.stop_reason or "driver ended"
                        ctx.stop_requested.set()
            if ctx.stop_requested.is_set() and not self._driver_running(DRIVER_GRACE_S):
                break
        self.act_on_signals()  # one that came as the role ended names the stop
        note_oom(now=True)  # a kill in the last moments (the driver may have died of it)
        if stall is not None:
            stall.flush()
        try:
            return self.conclude(outcome)
        finally:
            self.cleanup()

    @property
    def stacks_dir(self) -> str:
        return os.path.join(self.ctx.temp_dir, "stacks")

    def stall_watch(self) -> StallWatch | None:
        """Node 0 of a job with --stall-timeout watches its progress."""
        ctx, opts = self.ctx, self.ctx.manifest
        if ctx.rank != 0 or not opts.stall_timeout:
            return None
        return StallWatch(
            ctx.paths.job_dir,
            ctx.paths.job_id,
            duration_seconds(opts.stall_timeout),
            opts.stall_action or "warn",
            ctx.event,
            ctx.say,
        )

    def note_ray_deaths(self, watch: RayWatch) -> None:
        """A Ray daemon of this node that died while the job runs (job/ray_watch.py): named in
        the node log, the events and the driver's log; on node 0 (the GCS, the driver's own
        raylet) the job's Ray cluster is gone, so the job ends as failed, naming it."""
        ctx = self.ctx
        if ctx.stop_requested.is_set() or ctx.board is None:  # stopping, or Ray not up here yet
            return
        if not watch.armed:
            watch.arm()
        for died in watch.due(time.monotonic()):
            text = f"Ray's {died.daemon} on {ctx.node} died ({died.how})"
            ctx.say(text)
            ctx.event("ray_died", daemon=died.daemon, pid=died.pid, how=died.how)
            warn_driver_line(ctx.paths.driver_log, f"slurm-rl: WARNING: {text}; Ray's work there is lost")
            if ctx.rank == 0:
                death = RayDeath(ctx.node, died.daemon, died.how, time.time())
                gone = f"Ray died: {death.text()}: the job's Ray cluster is gone"
                self.stop_failed(gone, Cause(c.RAY_DIED, ctx.node))

    def stop_failed(self, reason: str | None, cause: Cause) -> None:
        """A cause that ends the job as failed (a stall, Ray's death): the driver is stopped as by
        scancel, the reason kept."""
        if not reason:
            return
        ctx = self.ctx
        self.failed_by = ctx.stop_reason = reason
        self.failed_cause = cause
        ctx.stop_requested.set()
        if ctx.driver is not None and ctx.driver.poll() is None:
            try:
                ctx.driver.send_signal(signal.SIGTERM)
            except ProcessLookupError:
                pass

    def conclude(self, outcome: dict[str, object]) -> int:
        """The node's exit code from the role's outcome; node 0 records the job's exit (conclusion.py).
        A node told to leave (its Ray failed on what preflight found, or up) ends quietly: 0."""
        if self.replaced or ("failure" in outcome and wait_replaced(self.ctx)):
            self.ctx.say(f"{LEAVING}; this node's failure, if any, was that: {outcome.get('failure', 'none')}")
            self.ctx.event("node_replaced", reason=LEAVING)
            return 0
        return conclude(self.ctx, outcome, self.failed_by, self.failed_cause)

    def _driver_running(self, grace_s: float) -> bool:
        """True while a signalled driver may still exit by itself (it got the signal too)."""
        driver = self.ctx.driver
        if driver is None or driver.poll() is not None:
            return False
        if self._stop_seen_at is None:
            self._stop_seen_at = time.monotonic()
        return time.monotonic() - self._stop_seen_at < grace_s

    def cleanup(self) -> None:
        clean_node(self.ctx)
