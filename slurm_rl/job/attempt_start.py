"""Node 0 as an attempt after the first starts: the last attempt's ending said (an
``attempt_start`` event), its leftover exit forgotten (SLURM requeued it by itself, after a node
failure or a preemption, so the batch script's finalize never cleared it), and the job ended
at once, with that cause, when ``--retry-on`` does not name it."""

from __future__ import annotations

from ..core.events import read_events
from ..core.exits import clear_exit, read_exit
from ..core.last_attempt import last_attempt
from ..core.retries import FAMILIES, add_bad_nodes, parse_retry_on
from .context import NodeContext


def begin_attempt(ctx: NodeContext) -> None:
    """Fails the job (ctx.fail) where the last attempt's cause may not be retried."""
    if ctx.attempt == 0 or ctx.rank != 0:
        return
    last = last_attempt(read_events(ctx.paths.events), ctx.attempt)
    if last.by_slurm and read_exit(ctx.paths)[0] is not None:
        clear_exit(ctx.paths)  # the last attempt's: this attempt records its own
    ctx.event(
        "attempt_start",
        last_cause=last.cause.line() if last.cause else "",
        last_reason=last.reason,
        by_slurm=last.by_slurm,
    )
    cause, retry = last.cause, parse_retry_on(ctx.manifest.retry_on)
    if not last.by_slurm or cause is None:
        return
    if cause.node and cause.kind in FAMILIES["node"]:  # a later retry of finalize's excludes it too
        add_bad_nodes(ctx.paths, [cause.node])
    if retry is None:
        return
    if not retry.covers(cause, None):
        named = f"--retry-on {ctx.manifest.retry_on}"
        ctx.fail(f"{last.reason}; not retried: its cause ({cause.kind}) is not one {named} names", cause)
    elif ctx.attempt > ctx.manifest.requeue:
        ctx.fail(f"{last.reason}; not retried: past --requeue {ctx.manifest.requeue}'s budget", cause)
