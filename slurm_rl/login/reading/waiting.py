"""What a pending job waits for, in words people act on: SLURM's reason (squeue's %r), and for
a heterogeneous job each component's, named by the part it holds (SLURM plans a job of parts'
components one by one: one part may wait for nodes while the others could start)."""

from __future__ import annotations

from ...core.parts import Part, component_parts
from ...slurm.records import JobState

# SLURM's commonest pending reasons (squeue(1), "JOB REASON CODES"), as what the job waits for
REASONS = {
    "Resources": "free nodes",
    "Priority": "jobs ahead of it in the queue",
    "Dependency": "the job it depends on",
    "DependencyNeverSatisfied": "a dependency that can never be met (cancel it)",
    "JobHeldUser": "a release (held: `scontrol release JOB`)",
    "JobHeldAdmin": "an administrator's release (held)",
    "BeginTime": "its start time (--begin)",
    "ReqNodeNotAvail": "nodes that are down, drained or reserved",
    "PartitionNodeLimit": "a partition that has fewer nodes than it asks for",
    "PartitionTimeLimit": "a partition whose time limit is shorter than its own",
    "Reservation": "its reservation",
    "NodeDown": "a node that is down",
}


def in_words(reason: str) -> str:
    """``Resources`` -> ``free nodes (Resources)``; a QOS or account limit named as such."""
    if reason in REASONS:
        return f"{REASONS[reason]} ({reason})"
    if reason.startswith(("QOS", "Assoc")):
        return f"a limit of its QOS or account ({reason})"
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
