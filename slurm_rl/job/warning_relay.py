"""The time-limit (or preemption) warning to the driver, where the job step's own signal does not
bring it. The batch script, on SLURM's warning signal, marks it (``markers/warned-<attempt>``) and
signals the step; in a heterogeneous job (a job of parts, ``--head-partition``) that signal did not
reach the driver's component on the lab (SLURM 26.05). So the head watches the marker too and,
a moment later, sends the driver SIGUSR2 itself unless the driver said it had it (its
``preempt_signal`` event): a driver that hooked ``slurm_rl.on_preempt`` hears of it once, one
that did not ignores SIGUSR2 as it always does."""

from __future__ import annotations

import os
import signal
import subprocess
import time

from ..core.events import read_events
from .context import NodeContext

POLL_S = 0.5
GRACE_S = 2.0  # the step's own signal comes at once where it comes at all


def relay_warning(ctx: NodeContext, driver: subprocess.Popen[bytes]) -> None:
    marker = ctx.paths.warned_marker(str(ctx.attempt))
    while driver.poll() is None and not marker.exists():
        time.sleep(POLL_S)
    if driver.poll() is not None:
        return
    time.sleep(GRACE_S)
    since = marker.stat().st_mtime - 1.0
    heard = any(
        e.get("event") == "preempt_signal" and float(e.get("t", 0)) >= since for e in read_events(ctx.paths.events)
    )
    if heard or driver.poll() is not None:
        return
    try:
        os.kill(driver.pid, signal.SIGUSR2)
    except ProcessLookupError:
        return
    ctx.event("warning_relayed", pid=driver.pid)
