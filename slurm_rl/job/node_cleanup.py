"""A node's cleanup at the job's end: whatever ended the job, this node's bootstrap stops exactly
the processes of this job here (it is their child subreaper), keeps Ray's logs and leaves no
node-local files."""

from __future__ import annotations

import atexit
import shutil
import subprocess
import sys
import time

import psutil

from ..core.procs import stop_job_processes, stop_processes
from . import ray_threads
from .context import NodeContext
from .spawn_gate import CLOSE_WAIT_S


def clean_node(ctx: NodeContext) -> None:
    """Stop exactly this job's processes on this node (the driver first: terminate, then kill),
    copy Ray's logs to the job dir, remove the node-local temp dir, and say what was done."""
    t0 = time.monotonic()
    if not ctx.spawns.close():  # a spawn in flight (Ray's daemon, the driver) ends first: nothing starts after
        ctx.say(f"cleanup: a process spawn still running after {CLOSE_WAIT_S:.0f} s; stopping what is there")
    try:  # what we started, and orphans re-parented to us (we are their subreaper)
        children = psutil.Process().children(recursive=True)
    except psutil.Error:
        children = []
    descendants = [p.pid for p in children]
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
    ray_threads.stop()  # the driver has ended: before the GCS they talk to goes
    forget_ray_at_exit()  # before the node-local dir goes, whichever branch removes it
    if ctx.is_service:  # a service part's task: its own instances only (a Ray node may share the node)
        killed = stop_processes(children, grace_s=0.5)
        if ctx.node not in ctx.nodes:  # no Ray node of the job here: the node-local dir is this task's
            shutil.rmtree(ctx.temp_dir, ignore_errors=True)
    else:
        copy_ray_logs(ctx)
        killed = stop_job_processes(ctx.job_id, ctx.temp_dir, grace_s=0.5, also=descendants)
        shutil.rmtree(ctx.temp_dir, ignore_errors=True)
    ctx.say(
        f"cleanup: stopped {len(killed)} processes in {time.monotonic() - t0:.2f} s: "
        + ", ".join(f"{k.name}({k.pid},{k.signal})" for k in killed)
    )
    ctx.event("node_cleaned", killed=len(killed), seconds=round(time.monotonic() - t0, 3))


def forget_ray_at_exit() -> None:
    """Importing Ray registers `ray.shutdown` to run at exit, and its first line imports more of
    Ray. The bootstrap never connects as a driver, and an unprivileged Apptainer job runs from the
    image extracted into the node-local dir removed next: the import would fail there, a
    traceback at the end of every such node log."""
    worker = sys.modules.get("ray._private.worker")
    if worker is not None:
        atexit.unregister(worker.shutdown)


def copy_ray_logs(ctx: NodeContext) -> None:
    src = ctx.ray_session_logs
    if src.is_dir():
        try:
            shutil.copytree(
                src,
                ctx.paths.ray_logs(ctx.node),
                dirs_exist_ok=True,
                ignore=shutil.ignore_patterns("*.sock"),
            )
        except (OSError, shutil.Error) as exc:
            ctx.say(f"could not copy Ray logs: {exc}")
