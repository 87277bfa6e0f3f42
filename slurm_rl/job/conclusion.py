"""How a node's role's outcome becomes its exit code and, on the node that knows it first, the
job's exit: code, reason and cause (core/causes.py; the driver's own end is judged by
core/ending.py). A member job's node never ends the job it joined (the head's watcher sees it
leave)."""

from __future__ import annotations

from ..core import causes as c
from ..core.causes import Cause
from ..core.ending import driver_cause, refined
from ..core.events import read_events, write_atomic
from ..core.exits import (
    STOPPED_RC,
    driver_log_tail,
    exit_reason,
    oom_kills,
    ray_deaths,
    record_exit,
    shell_exit_code,
    with_oom_kills,
    with_ray_deaths,
)
from ..core.job_env import MEMBER_RANK_BASE
from .context import NodeContext
from .node_checks import found_bad


def conclude(ctx: NodeContext, outcome: dict[str, object], failed_by: str, failed_cause: Cause | None) -> int:
    """This node's exit code; ``failed_by``: why node 0 ended the job as failed (a stall, Ray's
    death, a required service), its cause ``failed_cause``."""
    member = ctx.rank >= MEMBER_RANK_BASE
    if failed_by and "failure" not in outcome:  # FAILED whatever the stopped driver returned
        rc = outcome.get("rc")
        if isinstance(rc, int) and rc < 0:  # killed: the stall, then the signal
            finish(ctx, shell_exit_code(rc), exit_reason(rc, failed_by), failed_cause)
            return shell_exit_code(rc)
        finish(ctx, 1, failed_by, failed_cause)
        return 1
    if "failure" in outcome:
        exc = outcome["failure"]
        msg = f"{ctx.node}: {exc}; see {ctx.paths.node_log(ctx.node)}"
        ctx.say(f"FAILED: {exc}")
        ctx.event("node_failed", error=str(exc))
        write_atomic(ctx.paths.node_marker(ctx.attempt, ctx.rank, "failed"), msg + "\n")
        if member:  # a grown member leaves; a replacement that fails is the head's to see (member_watch.py)
            return 1
        if ctx.board is not None:  # the head hears of it at once (the file is for a node not yet joined)
            ctx.board.put("failed", msg, rank=ctx.rank)
        finish(ctx, 1, msg, Cause(c.LAUNCH_FAILURE, named_node(str(exc), ctx.nodes, ctx.node)))
        return 1
    if ctx.failure:  # another node failed or never joined: node 0 fails the job, naming it
        ctx.event("node_stopped", reason=ctx.failure)
        finish(ctx, 1, ctx.failure, ctx.failure_cause)
        return 1
    rc = outcome.get("rc")
    if not isinstance(rc, int):  # stopped before the role finished
        ctx.event("node_stopped", reason=ctx.stop_reason)
        if ctx.stop_flag.exists():  # node 0 had finished: a normal end
            return 0
        if member:  # its own job's end (shrink, preemption, its time limit) is not the job's
            return STOPPED_RC
        finish(ctx, STOPPED_RC, ctx.stop_reason or "stopped", Cause(c.CANCELLED) if ctx.signalled else None)
        return STOPPED_RC
    if ctx.rank == 0:
        tail = driver_log_tail(ctx.paths) if rc != 0 else ""
        finish(ctx, shell_exit_code(rc), exit_reason(rc, ctx.stop_reason), driver_cause(rc, ctx.signalled, tail))
        return shell_exit_code(rc)
    return rc


def finish(ctx: NodeContext, rc: int, reason: str, cause: Cause | None) -> None:
    """Record the job's exit (the first node to know wins) and tell the other nodes to stop. A
    process the OOM killer took (a Ray worker over the job's memory) is named beside the reason."""
    if rc != 0 and (cause is None or cause.kind in (c.LAUNCH_FAILURE, c.NODE_LOST, c.UNKNOWN, c.CANCELLED)):
        reason, cause = found_bad(ctx) or (reason, cause)  # what preflight found explains the failure
    events = read_events(ctx.paths.events)
    if cause is not None:  # an OOM kill or a Ray death under the failure: as core/ending.py reads it
        cause = refined(cause, oom_kills(events), ray_deaths(events), failed=rc != 0)
    record_exit(ctx.paths, rc, with_ray_deaths(with_oom_kills(reason, events), ray_deaths(events)), cause)
    ctx.stop_flag.touch()  # first: a node that finds the GCS gone reads it
    if ctx.board is not None:  # the other nodes ask the head's GCS, not the job dir
        ctx.board.put("stop", reason)
    ctx.event("stop_published", exit_code=rc)  # when the other nodes could first hear of it


def named_node(text: str, nodes: list[str], default: str) -> str:
    """The node a failure's text starts with ("node2: ...", relayed by another node), else ``default``."""
    first = text.split(":", 1)[0].split()[0] if text.strip() else ""
    return first if first in nodes else default
