"""Preemption and time-limit warnings for the driver: ``slurm_rl.on_preempt(callback)``.

SLURM sends the job's warning signal (``--signal``, default ``B:USR2@120``: SIGUSR2 to the batch
shell 120 s before the time limit) to the batch script, which forwards it to every node's
bootstrap; node 0's bootstrap forwards it to the driver only if the driver registered a
callback here (otherwise SIGUSR2's default action would kill an unsuspecting driver). USR1 is
never used: NCCL installs its own SIGUSR1 handler.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from pathlib import Path

HOOK_FILE = "preempt_hook"


def on_preempt(callback: Callable[[], None]) -> None:
    """Call ``callback()`` (in the main thread) when the job is about to be stopped, so the
    driver can checkpoint. Outside a slurm-rl job it is registered but never fires."""

    def handler(signum: int, _frame: object) -> None:
        callback()

    signal.signal(signal.SIGUSR2, handler)
    job_dir = os.environ.get("SLURM_RL_JOB_DIR")
    if job_dir:  # tells the bootstrap that forwarding the signal to us is safe
        Path(job_dir, HOOK_FILE).write_text(f"{os.getpid()}\n")
