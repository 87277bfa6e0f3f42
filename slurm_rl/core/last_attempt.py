"""How the previous attempt of a job ended, from its events: what ``slurm_rl.attempt()`` tells
the driver (so it resumes from its checkpoint knowing why), and what node 0 checks against
``--retry-on`` when SLURM requeued the job by itself (a node failure, a preemption)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from . import causes as c
from .causes import Cause, parse_cause
from .job_dir import NODE_ENDS, STOP_HEARD


@dataclass(frozen=True)
class LastAttempt:
    """How the previous attempt of a job ended: what ``slurm_rl.attempt()`` gives the driver."""

    attempt: int  # this attempt (0: the first)
    cause: Cause | None = None  # the previous attempt's (None on the first)
    reason: str = ""
    exit_code: int | None = None
    by_slurm: bool = False  # SLURM requeued it by itself (a node failure, a preemption), not finalize

    def as_dict(self) -> dict[str, Any]:
        return {
            "attempt": self.attempt,
            "cause": None if self.cause is None else self.cause.as_dict(),
            "reason": self.reason,
            "exit_code": self.exit_code,
            "by_slurm": self.by_slurm,
        }


def last_attempt(events: Iterable[dict[str, Any]], attempt: int) -> LastAttempt:
    """How attempt ``attempt - 1`` ended, from the job's events: finalize's ``requeue`` event (its
    cause and reason), else SLURM requeued it by itself: a node of it whose bootstrap never said
    how it ended was lost, else every node heard SLURM's stop (a preemption that requeues)."""
    if attempt <= 0:
        return LastAttempt(0)
    prev = attempt - 1
    events = list(events)
    for e in reversed(events):
        if e.get("event") == "requeue" and e.get("attempt") == prev:
            cause = parse_cause(str(e.get("cause") or "")) or Cause(c.UNKNOWN)
            return LastAttempt(attempt, cause, str(e.get("reason") or ""), e.get("exit_code"))
    started = {e.get("node") for e in events if e.get("event") == "node_start" and e.get("attempt", 0) == prev}
    ends = (*NODE_ENDS, STOP_HEARD)
    said = {e.get("node") for e in events if e.get("attempt", 0) == prev and e.get("event") in ends}
    lost = sorted(str(n) for n in started - said if n)
    if lost:
        reason = f"{', '.join(lost)} lost (SLURM requeued the job)"
        return LastAttempt(attempt, Cause(c.NODE_LOST, lost[0]), reason, None, True)
    return LastAttempt(attempt, Cause(c.PREEMPTED), "requeued by SLURM (a preemption or an administrator)", None, True)
