"""``slurm_rl.time_left()``: seconds until SLURM ends this job, so a run can checkpoint before
its time limit. From SLURM's own end time, which ``scontrol update TimeLimit=...`` moves while
the job runs; node 0's bootstrap asks SLURM every 15 s and keeps it in the job dir
(core/end_time.py), so calling this every step costs a file read, and a driver in a container
needs no SLURM client."""

from __future__ import annotations

import math

from ..core.end_time import read_time_left
from ..core.job_env import JobEnvironment
from ..core.paths import JobPaths


def time_left() -> float:
    """Seconds until SLURM ends this job (>= 0); inf outside a SLURM job, in a job without a
    time limit, or before node 0 first asked SLURM. SLURM's warning signal (``--signal``,
    ``slurm_rl.on_preempt``) comes before this reaches 0."""
    env = JobEnvironment.current()
    if not env.job_id or env.job_dir is None:
        return math.inf
    left = read_time_left(JobPaths(env.job_dir).end_time)
    return math.inf if left is None else left
