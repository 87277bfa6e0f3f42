"""``slurm_rl.attempt()``: which attempt of its job the driver is, and how the last one ended
(its cause, core/causes.py), so that it resumes from its checkpoint knowing why it is running
again. Outside a slurm-rl job, and on a job's first attempt: attempt 0, no cause."""

from __future__ import annotations

from ..core.events import read_events
from ..core.job_env import JobEnvironment
from ..core.last_attempt import LastAttempt, last_attempt
from ..core.paths import JobPaths


def attempt() -> LastAttempt:
    env = JobEnvironment.current()
    if env.job_dir is None or env.attempt == 0:
        return LastAttempt(env.attempt)
    return last_attempt(read_events(JobPaths(env.job_dir).events), env.attempt)
