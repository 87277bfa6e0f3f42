"""`python -m slurm_rl.job.cleanup --job-id J`: stop job J's processes on this node, remove its
node-local temp dir, print one JSON line saying what was done. Run on each node of the job by
`slurm-rl teardown` (inside the job with `srun --overlap`, or in a short cleanup step once the
allocation is gone).
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import shutil
import signal
import sys
import time

import psutil

from ..core.job_env import JobEnvironment
from ..core.paths import node_temp_dir
from ..core.procs import job_processes, stop_job_processes


def _ancestors() -> set[int]:
    """Our own process chain (srun step, shell): never ours to kill even if it names the job."""
    pids = set()
    try:
        proc: psutil.Process | None = psutil.Process()
        while proc is not None:
            pids.add(proc.pid)
            proc = proc.parent()
    except psutil.Error:
        pass
    return pids


def _bootstraps(job_id: str, temp_dir: str) -> list[psutil.Process]:
    """The job's node bootstraps here (``python -m slurm_rl.job.node``): the node step's tasks."""
    found = []
    for proc in job_processes(job_id, temp_dir, _ancestors()):
        try:
            if "slurm_rl.job.node" in proc.cmdline():
                found.append(proc)
        except psutil.Error:
            pass
    return found


def _signal_all(procs: list[psutil.Process], sig: int) -> None:
    for proc in procs:
        try:
            proc.send_signal(sig)
        except psutil.Error:
            pass


def clean_node(job_id: str, grace_s: float, temp_dir: str | None = None, hold: bool = False) -> dict[str, object]:
    """Stop the job's processes here. ``hold`` (a pass inside the live allocation): the node
    bootstraps are paused meanwhile and spared, since one that ends ends the job, and SLURM then
    ends this step too, its report unsent; they are resumed for the cancel that follows."""
    t0 = time.monotonic()
    temp_dir = temp_dir or node_temp_dir(job_id)
    held = _bootstraps(job_id, temp_dir) if hold else []
    _signal_all(held, signal.SIGSTOP)
    try:
        spared = _ancestors() | {p.pid for p in held}
        killed = stop_job_processes(job_id, temp_dir, grace_s=grace_s, exclude=spared)
    except BaseException:
        _signal_all(held, signal.SIGCONT)
        raise
    existed = os.path.isdir(temp_dir)
    shutil.rmtree(temp_dir, ignore_errors=True)
    if held:
        atexit.register(_signal_all, held, signal.SIGCONT)  # after the report is out (main prints it)
    return {
        "node": JobEnvironment.current().node,
        "killed": [{"pid": k.pid, "name": k.name, "signal": k.signal} for k in killed],
        "temp_dir_removed": existed and not os.path.exists(temp_dir),
        "seconds": round(time.monotonic() - t0, 3),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m slurm_rl.job.cleanup", description=__doc__)
    p.add_argument("--job-id", required=True)
    p.add_argument("--grace-s", type=float, default=1.0)
    p.add_argument("--temp-dir", help="the job's node-local dir (default: /tmp/srl-JOB_ID)")
    p.add_argument("--hold-bootstraps", action="store_true", help="spare the node bootstraps (a pass inside the job)")
    args = p.parse_args(argv)
    # Killing the job's driver ends the job, and SLURM then signals this step too (SIGTERM, then
    # SIGKILL after KillWait): finish the (bounded) work and print the report regardless.
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(sig, signal.SIG_IGN)
    print(json.dumps(clean_node(args.job_id, args.grace_s, args.temp_dir, args.hold_bootstraps)), flush=True)
    time.sleep(0.2)  # the report on its way to srun before a resumed bootstrap can end the job
    return 0


if __name__ == "__main__":
    sys.exit(main())
