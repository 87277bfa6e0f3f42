"""``slurm_rl.heartbeat()``: the driver says it is making progress (a long evaluation, a slow
data load between steps), so the job is not taken for stalled. Metrics steps and the driver's
own output count too (core/progress.py); outside a slurm-rl job or run it does nothing."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from ..core import progress
from ..core.job_env import JobEnvironment, Settings
from ..core.stacks import arm


def heartbeat(note: str = "") -> None:
    job_dir = JobEnvironment.current().job_dir
    if job_dir is not None:
        arm(Settings.current().stacks_dir, "driver")  # a driver without init_ray: stacks too
        progress.record(job_dir, "driver", f"heartbeat: {note}" if note else "heartbeat")


STEP_NOTE_S = 1.0  # at most one step note per second is written; the last one always is (<= 1 s late)
_lock = threading.Lock()
_steps: dict[str, Any] = {"written": 0.0, "pending": None, "timer": None}


def step_progress(job_dir: Path, values: dict[str, Any]) -> None:
    """A metrics line is progress: "step N" when it has a step, else "metrics". Fast steps are
    noted at most once a second (a file write costs ~0.1-0.6 ms, on NFS more; a stall is at
    least 20 s): a step within the second after the last note is written when the second is up,
    with its own time, unless a newer one replaced it by then."""
    arm(Settings.current().stacks_dir, "driver")
    step = values.get("step")
    note = (job_dir, f"step {step}" if step is not None else "metrics", time.time())
    with _lock:
        wait = _steps["written"] + STEP_NOTE_S - note[2]
        if wait > 0:
            _steps["pending"] = note
            if _steps["timer"] is None:
                timer = threading.Timer(wait, _flush)
                timer.daemon = True
                _steps["timer"] = timer
                timer.start()
            return
        _steps["written"], _steps["pending"] = note[2], None
    progress.record(note[0], "driver", note[1], t=note[2])


def _flush() -> None:
    with _lock:
        note, _steps["pending"], _steps["timer"] = _steps["pending"], None, None
        if note is not None:
            _steps["written"] = time.time()
    if note is not None:
        progress.record(note[0], "driver", note[1], t=note[2])
