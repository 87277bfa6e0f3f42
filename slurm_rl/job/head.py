"""Node 0's role: start the Ray head, wait until every node has joined, run the driver with
``RAY_ADDRESS`` set, return its exit code."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from ..core.events import write_json
from ..core.paths import JobPaths
from .context import NodeContext, NodeFailure


def joined_count(paths: JobPaths, attempt: int) -> int:
    """Worker nodes that joined the head in this attempt; NodeFailure if one failed instead."""
    failed = paths.node_markers(attempt, "failed")
    if failed:
        raise NodeFailure(failed[0].read_text().strip())
    return len(paths.node_markers(attempt, "up"))


def run_head(ctx: NodeContext) -> int:
    head_ip = ctx.node_ip(ctx.node)
    ports = ctx.ports
    ctx.ray_start(["--head", f"--port={ports.gcs}", "--include-dashboard=false", "--no-monitor",
                   f"--dashboard-port={ports.dashboard}"])
    address = f"{head_ip}:{ports.gcs}"
    ctx.event("node_up", address=address)
    cluster = {"job_id": int(ctx.job_id), "head_node": ctx.node, "head_ip": head_ip, "address": address,
               "ports": ports.as_dict(), "nodes": ctx.nodes, "temp_dir": ctx.temp_dir,
               "attempt": ctx.attempt, "ready_time": None}
    write_json(ctx.paths.cluster, cluster)
    ctx.wait_until(lambda: joined_count(ctx.paths, ctx.attempt) >= len(ctx.nodes) - 1,
                   ctx.manifest.ready_timeout_s, f"{len(ctx.nodes)} nodes to join the Ray head")
    write_json(ctx.paths.cluster, {**cluster, "ready_time": time.time()})
    ctx.event("ready", nodes=len(ctx.nodes))
    return run_driver(ctx, address)


def driver_env(ctx: NodeContext, address: str, environ: dict[str, str]) -> dict[str, str]:
    env = dict(environ)
    env["RAY_ADDRESS"] = address
    env["SLURM_RL_RAY_ADDRESS"] = address
    src_dir = ctx.manifest.experiment_src_dir
    if src_dir:  # imports next to the original experiment keep working
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [src_dir, env.get("PYTHONPATH")]))
    return env


def run_driver(ctx: NodeContext, address: str) -> int:
    argv = [sys.executable, str(ctx.paths.experiment), *ctx.manifest.experiment_args]
    ctx.event("driver_start", argv=argv)
    with open(ctx.paths.driver_log, "ab") as out:
        # SLURM delivers step signals to every process of the step (proctrack), the driver
        # included; SIGUSR2 arrives ignored (inherited from us) unless on_preempt hooks it
        ctx.driver = subprocess.Popen(argv, cwd=ctx.manifest.workdir, env=driver_env(ctx, address, dict(os.environ)),
                                      stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        if ctx.stop_requested.is_set():
            ctx.driver.terminate()
        rc = ctx.driver.wait()
    ctx.event("driver_end", exit_code=rc)
    return rc
