"""How a job ended, decided once: the evidence (the job dir's exit files and recorded cause, the
nodes that never reported, the OOM kills and Ray deaths, SLURM's state) in, the state people see,
the exit code, the reason in words and one cause (core/causes.py) out. Pure: no file is read
here (login/reading/summary.py gathers the evidence; the job's nodes call ``driver_cause`` at its end), so
every row of the decision is a table test (tests/unit/test_ending.py).

The rules, in order: SLURM's time limit is the cause whatever killed the driver; a driver that
was done (exit 0) stays COMPLETED whatever SLURM did to the job's last seconds; a preemption is
the cause, not its SIGTERM; a node SLURM lost, or one whose bootstrap never said how it ended
(in a job not cancelled), is the cause, not the SIGTERM or dead actor the others saw; else the
cause the node that saw the end recorded; a failure with OOM kills under it was the memory, one
with a Ray daemon's death under it that death; a driver error whose log shows a collective's
timeout was that timeout."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from . import causes as c
from .causes import Cause
from .exits import OomKills, RayDeath, with_kills, with_ray_deaths

# SLURM's final states that say the cause themselves, for a job whose nodes wrote nothing
_SLURM_CAUSE = {
    "CANCELLED": c.CANCELLED,
    "TIMEOUT": c.TIME_LIMIT,
    "DEADLINE": c.TIME_LIMIT,
    "PREEMPTED": c.PREEMPTED,
    "OUT_OF_MEMORY": c.OOM,
    "BOOT_FAIL": c.LAUNCH_FAILURE,
    "NODE_FAIL": c.NODE_LOST,
    "COMPLETED": c.COMPLETED,
}
COLLECTIVE_TIMEOUT = re.compile(
    r"Timed out waiting \d+ ?ms for (?:send|recv)|Watchdog caught collective operation timeout"
    r"|ran for \d+ milliseconds before timing out|gloo.*timed? ?out",
    re.IGNORECASE,
)
_SERVICE = re.compile(r"^service (\S+) failed on (\S+?):")
_RAY = re.compile(r"^Ray died: (\S+?)'s ")
_NODE_FIRST = re.compile(r"^(?:the job step could not start on |the head node )?(\S+?)[:;, ]")


@dataclass(frozen=True)
class Evidence:
    slurm_state: str | None  # SLURM's state (None: not asked; "UNKNOWN": SLURM forgot the job)
    in_queue: bool  # SLURM's state is one of the queue's (PENDING, RUNNING, COMPLETING, ...)
    finished: bool  # ... or one of its final ones (COMPLETED, FAILED, CANCELLED, ...)
    exit_code: int | None  # the job dir's
    exit_reason: str = ""
    cause: Cause | None = None  # recorded by the node that saw the end
    lost: Sequence[str] = ()  # nodes of the last attempt whose bootstrap never reported an end
    silent: Sequence[str] | None = None  # NODE_FAIL: SLURM's nodes of the job that said nothing
    oom: Sequence[OomKills] = ()
    ray_deaths: Sequence[RayDeath] = ()
    time_limit: str = "?"  # the job's, in words ("10 min")


@dataclass(frozen=True)
class Ending:
    state: str  # SLURM's word, made to agree with the job dir
    exit_code: int | None
    reason: str  # "" while running
    cause: Cause | None  # None while the job has not ended
    keep: tuple[int, str, Cause] | None = None  # an exit nothing on the nodes could write: the caller records it


def decide(e: Evidence) -> Ending:
    """The state, exit code, reason and cause of a job from its evidence (the rules above)."""
    state, code, reason = e.slurm_state or "UNKNOWN", e.exit_code, e.exit_reason
    asked = e.slurm_state is not None
    if state == "UNKNOWN" and code is not None:
        state = "COMPLETED" if code == 0 else "FAILED"
    elif state in ("RUNNING", "COMPLETING") and code is not None:
        state = "COMPLETING"  # the driver's exit is known, SLURM has not moved the job on yet
    lost = list(e.lost) if asked and not e.in_queue and code != 0 else []
    lost = [] if reason.startswith("the job step could not start on") else lost  # srun killed the others
    # a cancelled job's silent node is the cancel's: SLURM's SIGTERM can come while the node's step
    # is still starting (never seen), then its SIGKILL after KillWait (a lost node is NODE_FAIL)
    lost = [] if state == "CANCELLED" else lost
    silent = e.silent if state == "NODE_FAIL" else None
    cause, keep = None, False  # keep: an exit to record (with code 1)
    if state == "TIMEOUT":  # SLURM's SIGTERM/SIGKILL at the limit is no crash, whatever killed the driver
        reason, cause = f"hit the time limit ({e.time_limit})", Cause(c.TIME_LIMIT)
    elif state in ("PREEMPTED", "NODE_FAIL") and code == 0:  # the driver was done first
        if state == "NODE_FAIL" and "NODE_FAIL" not in reason:
            reason = f"{reason or 'driver exited 0'}; then a node failed as the job ended (SLURM: NODE_FAIL)"
        state, cause = "COMPLETED", Cause(c.COMPLETED)
    elif state == "NODE_FAIL" and code is not None and not lost and silent == []:
        # every node had reported its end: the job ended of its own cause, and a node failed as it
        # ended; unless that cause was a stop from outside: SLURM's, for the node it lost
        state, cause = "FAILED", recorded(e)
        cause = Cause(c.NODE_LOST) if cause.kind == c.CANCELLED else cause
        if "NODE_FAIL" not in reason:
            reason = f"{reason or 'stopped'}; then a node failed as the job ended (SLURM: NODE_FAIL)"
    elif state == "PREEMPTED":
        if not reason.startswith("preempted"):  # the cause, not the SIGTERM
            reason = f"preempted by SLURM (a higher-priority job took its nodes); then: {reason or 'stopped'}"
        cause = Cause(c.PREEMPTED)
    elif lost:  # the other nodes only saw the consequence (a SIGTERM, a dead actor)
        if not reason.startswith(f"{', '.join(lost)} lost:"):  # (said once: it may be written)
            reason = (
                f"{', '.join(lost)} lost: its node bootstrap never reported an end (the node died or SLURM "
                f"lost it; `sinfo -N` shows its state); then: {reason or state}"
            )
        cause, keep = Cause(c.NODE_LOST, lost[0]), code is None and e.finished
    elif state == "NODE_FAIL" and asked and " failed (SLURM: NODE_FAIL" not in reason:
        # a node that failed before its bootstrap started (or said anything)
        which = ", ".join(silent) if silent else "a node of the job"
        reason = f"{which} failed (SLURM: NODE_FAIL; `sinfo -N` shows its state); then: {reason or 'stopped'}"
        cause, keep = Cause(c.NODE_LOST, silent[0] if silent else ""), code is None
    elif state == "NODE_FAIL":  # said before (and written)
        cause = Cause(c.NODE_LOST, silent[0] if silent else _first_node(reason))
    elif code is not None:
        cause = recorded(e)
    elif e.finished:  # SLURM ended it before any node could say how (cancelled while pending, ...)
        cause = Cause(_SLURM_CAUSE.get(state.split()[0], c.UNKNOWN))
    kept = (1, reason, cause) if keep and cause is not None else None
    code = 1 if kept else code
    reason = with_kills(reason, list(e.oom))  # also a node's report after node 0 recorded the exit
    reason = with_ray_deaths(reason, list(e.ray_deaths)) if code is not None else reason
    if cause is not None:
        cause = refined(cause, e.oom, e.ray_deaths, failed=state != "COMPLETED")
    return Ending(state, code, reason, cause, kept)


def refined(cause: Cause, oom: Sequence[OomKills], deaths: Sequence[RayDeath], failed: bool) -> Cause:
    """A failure with OOM kills under it was the memory (what the OOM killer took is the likely
    cause); one with a Ray daemon's death under it, that death (its actors' Ray dying)."""
    if failed and oom and cause.kind in _MEMORY_SHAPED:
        return Cause(c.OOM, oom[0].node)
    if failed and deaths and cause.kind in _RAY_SHAPED:
        return Cause(c.RAY_DIED, deaths[0].node)
    return cause


# the consequences an OOM kill has (a worker gone, the driver's error, a daemon dead), and a Ray death
_MEMORY_SHAPED = {c.DRIVER_ERROR, c.DRIVER_KILLED, c.RAY_DIED, c.LAUNCH_FAILURE, c.UNKNOWN}
_RAY_SHAPED = {c.DRIVER_ERROR, c.DRIVER_KILLED, c.UNKNOWN}


def recorded(e: Evidence) -> Cause:
    """The cause the nodes recorded, else read from the exit code and reason (a job dir of an
    older slurm-rl, or an exit the batch script's shell wrote)."""
    if e.cause is not None:
        return e.cause
    return cause_from_reason(e.exit_code, e.exit_reason)


def cause_from_reason(code: int | None, reason: str) -> Cause:
    if code == 0:
        return Cause(c.COMPLETED)
    service = _SERVICE.match(reason)
    ray = _RAY.match(reason)
    if service:
        return Cause(c.REQUIRED_SERVICE, service.group(2), service.group(1))
    if ray:
        return Cause(c.RAY_DIED, ray.group(1))
    for prefix, kind in (
        ("cancelled by slurm-rl teardown", c.CANCELLED),
        ("preempted", c.PREEMPTED),
        ("hit the time limit", c.TIME_LIMIT),
        ("stalled ", c.STALLED),
        ("the job step could not start on ", c.LAUNCH_FAILURE),
        ("the head node ", c.NODE_LOST),
    ):
        if reason.startswith(prefix):
            return Cause(kind, _first_node(reason) if kind in (c.LAUNCH_FAILURE, c.NODE_LOST) else "")
    if " received on " in reason.split(";")[0]:  # SIGTERM received on node1 (scancel, ...)
        return Cause(c.CANCELLED)
    return driver_cause_of(reason)


def driver_cause_of(reason: str) -> Cause:
    if reason.startswith("driver killed by signal"):
        return Cause(c.DRIVER_KILLED)
    if reason.startswith("driver exited"):
        return Cause(c.DRIVER_ERROR)
    return Cause(c.LAUNCH_FAILURE, _first_node(reason)) if reason else Cause(c.UNKNOWN)


def driver_cause(rc: int, stopped: bool, log_tail: str = "") -> Cause:
    """The cause of a driver's own end (its return code; ``stopped``: its node had been told to
    stop, so the signal was that stop's): a collective's timeout where its log shows one."""
    if rc == 0:
        return Cause(c.COMPLETED)
    if stopped:
        return Cause(c.CANCELLED)
    if COLLECTIVE_TIMEOUT.search(log_tail):
        return Cause(c.COLLECTIVE_TIMEOUT)
    return Cause(c.DRIVER_KILLED if rc < 0 else c.DRIVER_ERROR)


def _first_node(reason: str) -> str:
    m = _NODE_FIRST.match(reason.removeprefix("node "))
    return m.group(1) if m else ""
