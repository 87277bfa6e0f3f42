"""The node bootstrap: ``python -m slurm_rl.job.node --job-dir DIR``, started on every node by
the job's one srun. This module is the job lifecycle around the two roles (head.py, worker.py):
signals, the role thread, the job's exit, and cleanup.

Every bootstrap owns the Ray processes of its node: it is their child subreaper, and whatever
ends the job (driver exit, scancel, time limit, a failed node) it stops exactly the processes
of this job on its node, copies Ray's logs to the job dir and removes the node-local temp dir.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import resource
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path

import psutil

from ..core.events import read_events, write_atomic
from ..core.exits import STOPPED_RC, OomKills, exit_reason, record_exit, shell_exit_code, with_oom_kills
from ..core.job_env import TEMP_DIR_ENV, JobEnvironment
from ..core.manifest import load_manifest
from ..core.paths import JobPaths
from ..core.procs import MARKER_ENV, stop_job_processes
from .context import POLL_S, NodeContext, NodeFailure, Stopped
from .head import run_head
from .memory import OomWatch, warn_driver
from .network import socket_ifname_env
from .ray_start import ray_config_env
from .worker import PRE_JOIN_FILE_POLL_S, run_worker

PR_SET_CHILD_SUBREAPER = 36
DRIVER_GRACE_S = 2.0  # a signalled driver gets this long to exit (checkpoint) before the kill


def describe_error(exc: BaseException) -> str:
    """An exception in one line; an OSError names its path (``FileNotFoundError: ... '/tmp/x'``)."""
    if isinstance(exc, OSError) and exc.filename:
        return f"{type(exc).__name__}: {exc.strerror}: {exc.filename!r} does not exist or is not usable on this node"
    return repr(exc)


class Lifecycle:
    """Runs this node's role in a thread so that a stop (signal, failed node) is acted on at
    once, even while `ray start` is blocked in C code; then records the exit and cleans up."""

    def __init__(self, ctx: NodeContext, failed_setup: tuple[int, int] | None = None) -> None:
        self.ctx = ctx
        self.failed_setup = failed_setup
        self._stop_seen_at: float | None = None

    def on_signal(self, signum: int, _frame: object) -> None:
        ctx = self.ctx
        if signum == signal.SIGCONT:
            return  # scancel sends SIGCONT before SIGTERM
        name = signal.Signals(signum).name
        ctx.say(f"received {name}")
        if not ctx.stop_requested.is_set():
            ctx.stop_reason = f"{name} received on {ctx.node} (scancel, time limit or preemption)"
        ctx.stop_requested.set()
        if ctx.driver is not None and ctx.driver.poll() is None:
            try:
                ctx.driver.send_signal(signum)
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
        # NCCL and gloo on the interface the spec chose (Ray, the driver and workers inherit them)
        chosen = socket_ifname_env(ctx.address, dict(os.environ))
        os.environ.update(chosen)
        if chosen:
            ctx.say(
                f"network: {ctx.ip} on {ctx.address.interface}; set {', '.join(f'{k}={v}' for k, v in chosen.items())}"
            )
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
        return run_head(ctx) if ctx.rank == 0 else run_worker(ctx)

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
        while not done.wait(POLL_S):
            note_oom()
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
        note_oom(now=True)  # a kill in the last moments (the driver may have died of it)
        try:
            return self.conclude(outcome)
        finally:
            self.cleanup()

    def conclude(self, outcome: dict[str, object]) -> int:
        """The node's exit code from the role's outcome; node 0 records the job's exit."""
        ctx = self.ctx
        if "failure" in outcome:
            exc = outcome["failure"]
            msg = f"{ctx.node}: {exc}; see {ctx.paths.node_log(ctx.node)}"
            ctx.say(f"FAILED: {exc}")
            ctx.event("node_failed", error=str(exc))
            write_atomic(ctx.paths.node_marker(ctx.attempt, ctx.rank, "failed"), msg + "\n")
            if ctx.board is not None:  # the head hears of it at once (the file is for a node not yet joined)
                ctx.board.put("failed", msg, rank=ctx.rank)
            self.finish(1, msg)
            return 1
        if ctx.failure:  # another node failed or never joined: node 0 fails the job, naming it
            ctx.event("node_stopped", reason=ctx.failure)
            self.finish(1, ctx.failure)
            return 1
        rc = outcome.get("rc")
        if not isinstance(rc, int):  # stopped before the role finished
            ctx.event("node_stopped", reason=ctx.stop_reason)
            if ctx.stop_flag.exists():  # node 0 had finished: a normal end
                return 0
            self.finish(STOPPED_RC, ctx.stop_reason or "stopped")
            return STOPPED_RC
        if ctx.rank == 0:
            self.finish(shell_exit_code(rc), exit_reason(rc, ctx.stop_reason))
            return shell_exit_code(rc)
        return rc

    def _driver_running(self, grace_s: float) -> bool:
        """True while a signalled driver may still exit by itself (it got the signal too)."""
        driver = self.ctx.driver
        if driver is None or driver.poll() is not None:
            return False
        if self._stop_seen_at is None:
            self._stop_seen_at = time.monotonic()
        return time.monotonic() - self._stop_seen_at < grace_s

    def finish(self, rc: int, reason: str) -> None:
        # a process the OOM killer took (a Ray worker over the job's memory) is the likely cause
        ctx = self.ctx
        record_exit(ctx.paths, rc, with_oom_kills(reason, read_events(ctx.paths.events)))
        ctx.stop_flag.touch()  # first: a node that finds the GCS gone reads it
        if ctx.board is not None:  # the other nodes ask the head's GCS, not the job dir
            ctx.board.put("stop", reason)

    def cleanup(self) -> None:
        ctx = self.ctx
        t0 = time.monotonic()
        try:  # what we started, and orphans re-parented to us (we are their subreaper)
            descendants = [p.pid for p in psutil.Process().children(recursive=True)]
        except psutil.Error:
            descendants = []
        if ctx.driver is not None and ctx.driver.poll() is None:
            if ctx.stop_requested.is_set():
                # it got the signal and its grace already: SLURM's SIGKILL comes KillWait after its
                # SIGTERM, and what runs after us (pyxis removing the container) needs that time
                ctx.driver.kill()
            else:
                ctx.driver.terminate()
            try:
                ctx.driver.wait(timeout=2.0)
            except subprocess.TimeoutExpired:
                ctx.driver.kill()
        self._copy_ray_logs()
        killed = stop_job_processes(ctx.job_id, ctx.temp_dir, grace_s=0.5, also=descendants)
        shutil.rmtree(ctx.temp_dir, ignore_errors=True)
        ctx.say(
            f"cleanup: stopped {len(killed)} processes in {time.monotonic() - t0:.2f} s: "
            + ", ".join(f"{k.name}({k.pid},{k.signal})" for k in killed)
        )
        ctx.event("node_cleaned", killed=len(killed), seconds=round(time.monotonic() - t0, 3))

    def _copy_ray_logs(self) -> None:
        src = Path(self.ctx.temp_dir) / "session_latest" / "logs"
        if src.is_dir():
            try:
                shutil.copytree(
                    src,
                    self.ctx.paths.ray_logs(self.ctx.node),
                    dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns("*.sock"),
                )
            except (OSError, shutil.Error) as exc:
                self.ctx.say(f"could not copy Ray logs: {exc}")


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m slurm_rl.job.node", description=__doc__)
    p.add_argument("--job-dir", required=True)
    p.add_argument(
        "--failed-setup-line",
        type=int,
        default=None,
        help="(from the ERR trap) the node script line of the setup line that failed",
    )
    p.add_argument("--failed-setup-rc", type=int, default=None)
    return p.parse_args(argv)


def raise_open_files_limit() -> int:
    """The open-files soft limit up to the hard limit, for this process and all it starts (Ray
    opens several sockets per worker; sites often leave the soft limit at 1024). Returns it."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        want = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
            soft = want
        except (ValueError, OSError):
            pass
    return soft


def config_dir_env(environ: Mapping[str, str], temp_dir: str) -> dict[str, str]:
    """Where tools keep their caches when the home directory is read-only (a container without
    the home mounted): matplotlib's MPLCONFIGDIR in the job's node-local dir, instead of a
    warning and a new temporary font cache in every process that plots."""
    if "MPLCONFIGDIR" in environ:
        return {}
    config = Path(environ.get("XDG_CONFIG_HOME") or Path(environ.get("HOME") or Path.home()) / ".config")
    probe = config
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    return {} if os.access(probe, os.W_OK) else {"MPLCONFIGDIR": f"{temp_dir}/matplotlib"}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if not JobEnvironment.current().in_slurm_job:
        print("slurm_rl.job.node runs inside a SLURM job step (started by the sbatch script)", file=sys.stderr)
        return 2
    try:  # orphaned Ray daemons re-parent to us, so they stay in this job step's process tree
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (OSError, AttributeError):
        pass
    raise_open_files_limit()
    paths = JobPaths(Path(args.job_dir))
    paths.logs.mkdir(parents=True, exist_ok=True)
    paths.markers.mkdir(parents=True, exist_ok=True)
    manifest = load_manifest(paths.manifest)
    # This job's Ray accepts only clients holding the job's token (written by submit, mode 0600).
    os.environ["RAY_AUTH_MODE"] = "token"
    os.environ["RAY_AUTH_TOKEN_PATH"] = str(paths.ray_auth_token)
    # A lost node is declared dead within NODE_LOST_WINDOW_S (its actors' callers get the error);
    # a large job's GCS is tuned for the registration burst instead (ray_config_env)
    for key, value in ray_config_env(manifest.total_nodes).items():
        os.environ.setdefault(key, value)
    # Where this job keeps node-local files (Ray's temp dir; uv environments of worker groups).
    os.environ[TEMP_DIR_ENV] = manifest.temp_dir(paths.job_id)
    os.environ.update(config_dir_env(os.environ, os.environ[TEMP_DIR_ENV]))
    # The marker goes last in the environment children inherit: processes that rewrite their
    # title (Ray's "ray::..." workers) overwrite the start of /proc/PID/environ.
    os.environ.pop(MARKER_ENV, None)
    os.environ[MARKER_ENV] = paths.job_id  # the job dir's id (a hetjob component has its own SLURM_JOB_ID)
    node = JobEnvironment.current().node
    log = open(paths.node_log(node), "a", buffering=1)  # noqa: SIM115 - lives as long as the process
    ctx = NodeContext.from_environ(dict(os.environ), paths, manifest, log)
    failed = (args.failed_setup_line, args.failed_setup_rc or 1) if args.failed_setup_line is not None else None
    life = Lifecycle(ctx, failed)
    # Everything this node prints (ray start included) goes to logs/node-<name>.log.
    os.dup2(log.fileno(), 1)
    os.dup2(log.fileno(), 2)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGCONT):
        signal.signal(sig, life.on_signal)
    # The job's warning signal (--signal, USR2) reaches every process of the step. Ignoring it
    # here makes every child (Ray, the driver) inherit "ignore": only a driver that asked for
    # it with slurm_rl.on_preempt(callback) reacts.
    signal.signal(signal.SIGUSR2, signal.SIG_IGN)
    return life.run()


if __name__ == "__main__":
    sys.exit(main())
