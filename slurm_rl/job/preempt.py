"""Preemption and time-limit warnings for the driver: ``slurm_rl.on_preempt(callback)``.

SLURM sends the job's warning signal (``--signal``, default ``B:USR2@120``: SIGUSR2 to the batch
shell 120 s before the time limit); the batch script hands it to the job step, whose every
process receives it. The node bootstraps start everything with SIGUSR2 ignored, so only a
driver that registered a callback here reacts (SIGUSR2's default action would otherwise kill
it). USR1 is never used: NCCL installs its own SIGUSR1 handler.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

from ..core.events import append_event
from ..core.paths import JobPaths


def on_preempt(callback: Callable[[], None]) -> None:
    """Call ``callback()`` (in the main thread) when the job is about to be stopped, so the
    driver can checkpoint; at once if the warning came before this call. Outside a slurm-rl
    job it is registered but never fires."""

    job_dir = os.environ.get("SLURM_RL_JOB_DIR")

    def handler(signum: int, _frame: object) -> None:
        if job_dir:
            append_event(JobPaths(Path(job_dir)).events, "preempt_signal", hooked=True)
        callback()

    signal.signal(signal.SIGUSR2, handler)
    attempt = os.environ.get("SLURM_RESTART_COUNT", "0") or "0"
    if job_dir and JobPaths(Path(job_dir)).warned_marker(attempt).exists():
        handler(signal.SIGUSR2, None)  # the warning came before the driver was listening


REQUEUE_RC = 75  # EX_TEMPFAIL: "try again later"
REQUESTED_REQUEUE_LIMIT = 20  # attempts a job may ask for by itself (on top of --requeue for failures)


def requeue(reason: str = "") -> NoReturn:
    """Ask for another attempt of this job and exit the driver (status REQUEUE_RC). The batch
    script's last step requeues the job (same job id, same job dir, a fresh Ray cluster); the
    experiment starts again and should resume from its checkpoint. Meant for the time-limit
    warning (``on_preempt``). Outside a SLURM job there is nothing to requeue: it says so."""
    job_dir = os.environ.get("SLURM_RL_JOB_DIR")
    attempt = os.environ.get("SLURM_RESTART_COUNT", "0") or "0"
    if job_dir and os.environ.get("SLURM_JOB_ID"):
        paths = JobPaths(Path(job_dir))
        paths.requeue_request(attempt).parent.mkdir(parents=True, exist_ok=True)
        paths.requeue_request(attempt).write_text(reason + "\n")
        append_event(paths.events, "requeue_requested", attempt=int(attempt), reason=reason)
        print(f"slurm_rl.requeue(): attempt {attempt} asks for another ({reason or 'no reason given'})",
              file=sys.stderr, flush=True)
    else:
        print("slurm_rl.requeue(): not inside a SLURM job, nothing requeues this run; run it again to resume",
              file=sys.stderr, flush=True)
    sys.stdout.flush()
    raise SystemExit(REQUEUE_RC)
