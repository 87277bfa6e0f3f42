"""`python -m slurm_rl.job.cleanup --job-id J`: stop job J's processes on this node, remove its
node-local temp dir, print one JSON line saying what was done. Run on each node of the job by
`slurm-rl teardown` (inside the job with `srun --overlap`, or in a short cleanup step once the
allocation is gone).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import sys
import time

import psutil

from ..core.job_env import JobEnvironment
from ..core.paths import node_temp_dir
from ..core.procs import stop_job_processes


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


def clean_node(job_id: str, grace_s: float, temp_dir: str | None = None) -> dict[str, object]:
    t0 = time.monotonic()
    temp_dir = temp_dir or node_temp_dir(job_id)
    killed = stop_job_processes(job_id, temp_dir, grace_s=grace_s, exclude=_ancestors())
    existed = os.path.isdir(temp_dir)
    shutil.rmtree(temp_dir, ignore_errors=True)
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
    args = p.parse_args(argv)
    # Killing the job's driver ends the job, and SLURM then signals this step too (SIGTERM, then
    # SIGKILL after KillWait): finish the (bounded) work and print the report regardless.
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(sig, signal.SIG_IGN)
    print(json.dumps(clean_node(args.job_id, args.grace_s, args.temp_dir)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
