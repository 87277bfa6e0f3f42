"""Preemption and time-limit warnings for the driver: ``slurm_rl.on_preempt(callback)``.

SLURM sends the job's warning signal (``--signal``, default ``B:USR2@120``: SIGUSR2 to the batch
shell 120 s before the time limit); the batch script hands it to the job step, whose every
process receives it. The node bootstraps start everything with SIGUSR2 ignored, so only a
driver that registered a callback here reacts (SIGUSR2's default action would otherwise kill
it). USR1 is never used: NCCL installs its own SIGUSR1 handler.
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Callable
from typing import NoReturn

from ..core.events import append_event, write_atomic
from ..core.exits import REQUEUE_RC
from ..core.job_env import JobEnvironment
from ..core.paths import JobPaths


def on_preempt(callback: Callable[[], None]) -> None:
    """Call ``callback()`` (in the main thread) when the job is about to be stopped, so the
    driver can checkpoint; at once if the warning came before this call. Outside a slurm-rl
    job it is registered but never fires."""

    env = JobEnvironment.current()
    job_dir = env.job_dir

    def handler(signum: int, _frame: object) -> None:
        if job_dir:
            append_event(JobPaths(job_dir).events, "preempt_signal", hooked=True)
        callback()

    signal.signal(signal.SIGUSR2, handler)
    if job_dir and JobPaths(job_dir).warned_marker(str(env.attempt)).exists():
        handler(signal.SIGUSR2, None)  # the warning came before the driver was listening


def requeue(reason: str = "") -> NoReturn:
    """Ask for another attempt of this job and exit the driver (status REQUEUE_RC). The batch
    script's last step requeues the job (same job id, same job dir, a fresh Ray cluster); the
    experiment starts again and should resume from its checkpoint. Meant for the time-limit
    warning (``on_preempt``). Outside a SLURM job there is nothing to requeue: it says so."""
    env = JobEnvironment.current()
    attempt = str(env.attempt)
    if env.in_slurm_rl_job:
        paths = JobPaths(env.require_job_dir())
        write_atomic(paths.requeue_request(attempt), reason + "\n")
        append_event(paths.events, "requeue_requested", attempt=int(attempt), reason=reason)
        print(
            f"slurm_rl.requeue(): attempt {attempt} asks for another ({reason or 'no reason given'})",
            file=sys.stderr,
            flush=True,
        )
    else:
        print(
            "slurm_rl.requeue(): not inside a SLURM job, nothing requeues this run; run it again to resume",
            file=sys.stderr,
            flush=True,
        )
    sys.stdout.flush()
    raise SystemExit(REQUEUE_RC)
