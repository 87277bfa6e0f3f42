"""``slurm_rl.heartbeat()``: the driver says it is making progress (a long evaluation, a slow
data load between steps), so the job is not taken for stalled. Metrics steps and the driver's
own output count too (core/progress.py); outside a slurm-rl job or run it does nothing."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..core import progress
from ..core.job_env import JobEnvironment
from ..core.stacks import STACKS_DIR_ENV, arm


def heartbeat(note: str = "") -> None:
    job_dir = JobEnvironment.current().job_dir
    if job_dir is not None:
        arm(os.environ.get(STACKS_DIR_ENV, ""), "driver")  # a driver without init_ray: stacks too
        progress.record(job_dir, "driver", f"heartbeat: {note}" if note else "heartbeat")


def step_progress(job_dir: Path, values: dict[str, Any]) -> None:
    """A metrics line is progress: "step N" when it has a step, else "metrics"."""
    arm(os.environ.get(STACKS_DIR_ENV, ""), "driver")
    step = values.get("step")
    progress.record(job_dir, "driver", f"step {step}" if step is not None else "metrics")
