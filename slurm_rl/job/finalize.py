"""`python -m slurm_rl.job.finalize --srun-rc RC`: the last line of the batch script.

Exits with the driver's exit code (srun's own would be the worst of all nodes'). When the
attempt failed and the manifest's ``requeue`` allows another (``SLURM_RESTART_COUNT < N``), or the
driver asked for one (``slurm_rl.requeue()``, e.g. on the time-limit warning), it
records the attempt in events.jsonl, clears the attempt's exit files and requeues the job: the
next attempt builds a fresh Ray cluster and appends to the same job dir.
"""

from __future__ import annotations

import argparse
import sys

from ..core.events import append_event
from ..core.exits import REQUESTED_REQUEUE_LIMIT, clear_exit, read_exit, record_exit
from ..core.job_env import JobEnvironment
from ..core.manifest import load_manifest
from ..core.paths import JobPaths
from ..core.slurm import SlurmClient


def final_exit_code(paths: JobPaths, srun_rc: int) -> tuple[int, str]:
    rc, reason = read_exit(paths)
    if rc is None:
        rc, reason = (
            srun_rc,
            f"the job step ended with exit {srun_rc} before the driver finished; see {paths.batch_log}",
        )
        if srun_rc != 0:
            record_exit(paths, rc, reason)
    return rc, reason


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m slurm_rl.job.finalize")
    p.add_argument("--srun-rc", type=int, required=True)
    args = p.parse_args(argv)
    env = JobEnvironment.current()
    paths = JobPaths(env.require_job_dir())
    requeue = load_manifest(paths.manifest).requeue
    attempt = env.attempt
    rc, reason = final_exit_code(paths, args.srun_rc)
    requested = paths.requeue_request(attempt).exists() and attempt < REQUESTED_REQUEUE_LIMIT
    if rc != 0 and (attempt < requeue or requested):
        append_event(paths.events, "requeue", attempt=attempt, exit_code=rc, reason=reason, requested=requested)
        clear_exit(paths)
        SlurmClient().requeue(int(env.job_id or paths.job_id), make_requeueable=requested and requeue == 0)
        return rc
    append_event(paths.events, "job_end", attempt=attempt, exit_code=rc)
    return rc


if __name__ == "__main__":
    sys.exit(main())
