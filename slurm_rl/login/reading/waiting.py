"""What a pending job waits for, in words people act on: SLURM's reason (squeue's %r), and for
a heterogeneous job each component's, named by the part it holds (SLURM plans a job of parts'
components one by one: one part may wait for nodes while the others could start); then when
SLURM expects it to start and how many jobs of its partition go first (``queue_place``)."""

from __future__ import annotations

import time
from datetime import datetime

from ...core.parts import Part, component_parts
from ...slurm.records import JobState

# SLURM's pending reasons a user can act on (squeue(1), "JOB REASON CODES"): what the job waits
# for, and what to do where the wait may never end by itself
REASONS = {
    "Resources": "free nodes: the nodes it asks for are busy",
    "Priority": "jobs of higher priority ahead of it",
    "Dependency": "the job it depends on",
    "DependencyNeverSatisfied": "a dependency that can never be met (cancel it)",
    "JobHeldUser": "a release (held: `scontrol release JOB`)",
    "JobHeldAdmin": "an administrator's release (held)",
    "BeginTime": "its start time (--begin)",
    "ReqNodeNotAvail": "nodes that are down, drained or reserved (`sinfo -R` says why)",
    "PartitionNodeLimit": "a partition that has fewer nodes than it asks for (ask for fewer)",
    "PartitionTimeLimit": "a partition whose time limit is shorter than its own (lower --time)",
    "PartitionDown": "its partition, which is down (an administrator brings it up)",
    "PartitionInactive": "its partition, which is inactive (an administrator brings it up)",
    "PartitionConfig": "a partition that cannot run it as asked (GPUs, memory or CPUs per node)",
    "Reservation": "its reservation to start",
    "ReservationDeleted": "a reservation that is gone (cancel it, submit without --reservation)",
    "NodeDown": "a node that is down",
    "BadConstraints": "node features no node has (check -C)",
    "InvalidQOS": "nothing: its QOS is not valid for it (cancel it, pick another --qos)",
    "InvalidAccount": "nothing: its account is not valid (cancel it, pick another -A)",
    "Licenses": "licenses to free up",
    "JobArrayTaskLimit": "its own array's running-task limit (%N)",
}


def in_words(reason: str) -> str:
    """``Resources`` -> ``free nodes: ... (Resources)``; a QOS or account limit named as such."""
    code = reason.split(",")[0].strip()  # "ReqNodeNotAvail, UnavailableNodes:node[1-3]"
    detail = reason[len(code) :].lstrip(", ")
    if code in REASONS:
        return f"{REASONS[code]} ({reason})" if not detail else f"{REASONS[code]} ({code}: {detail})"
    if code.startswith(("QOS", "Assoc")):
        what, shows = ("its QOS", "qos") if code.startswith("QOS") else ("its account", "assoc")
        return f"a limit of {what} ({reason}; `sacctmgr show {shows}` shows it)"
    return reason or "SLURM's scheduler"


def waits_for(state: JobState | None, parts: dict[str, Part]) -> str:
    """ "" unless the job is pending; else what it waits for, per part for a job of parts."""
    if state is None or state.state != "PENDING":
        return ""
    if parts and state.components:
        names = component_parts(parts)
        said = [f"{names[i] if i < len(names) else f'component {i}'}: {in_words(r)}" for i, r in state.components]
        return "; ".join(said)
    reasons = sorted({r for _, r in state.components} or {state.reason})
    return "; ".join(in_words(r) for r in reasons if r and r != "None") or in_words("")


def expected_start(state: JobState | None, now: float | None = None) -> str:
    """SLURM's estimate of a pending job's start, in words ("~2 h 5 min from now, at 14:02");
    "" where SLURM has none (its backfill scheduler has not planned the job yet)."""
    if state is None or state.state != "PENDING" or not state.start:
        return ""
    try:
        at = datetime.fromisoformat(state.start).timestamp()
    except ValueError:
        return ""
    left = at - (time.time() if now is None else now)
    when = time.strftime("%H:%M" if left < 86400 else "%a %H:%M", time.localtime(at))
    if left <= 60:
        return f"as soon as it can, SLURM estimates (at {when})"
    hours, minutes = divmod(int(left // 60), 60)
    ahead = f"{hours} h {minutes} min" if hours else f"{minutes} min"
    return f"~{ahead} from now, at {when} (SLURM's estimate)"


def queue_place(state: JobState | None, ahead: int | None, now: float | None = None) -> str:
    """A pending job's place, in words: when SLURM expects it to start, how many jobs go first."""
    said = [f"starts {s}" for s in [expected_start(state, now)] if s]
    if ahead is not None and state is not None:
        where = f"partition {state.partition.split(',')[0]}" if state.partition else "its partition"
        said.append(f"{ahead} job{'s' * (ahead != 1)} ahead of it in {where}")
    return "; ".join(said)
