"""A job as people should see it (JobSummary): its job dir and SLURM's state decided into one
state, phase, exit and cause; while pending, what it waits for and its place in the queue; once
ended, SLURM's accounting record and the end in words (end_line). Following a job: job_wait.py."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ...core.causes import COMPLETED, Cause
from ...core.end_time import read_time_left
from ...core.ending import Evidence, decide
from ...core.exits import OomKills, RayDeath, read_cause, read_exit, record_exit
from ...core.fields import human_time_limit
from ...core.job_dir import read_job_dir, silent_nodes
from ...core.job_ids import JobId, is_local
from ...core.members import GROW, nodes_now
from ...core.paths import JobPaths
from ...core.progress import Progress, stall_line
from ...core.progress import last as last_progress
from ...core.service_states import status_fields
from ...slurm import JobRecord, JobState, SlurmClient
from .follow import last_traceback
from .waiting import queue_place, waits_for


@dataclass(frozen=True)
class JobSummary:
    job_id: JobId
    paths: JobPaths
    state: str
    phase: str
    nodes_up: int
    nodes: int
    exit_code: int | None
    exit_reason: str
    cause: Cause | None = None  # why it ended (core/causes.py), None until it has
    record: JobRecord | None = field(default=None, compare=False)  # sacct's, once the job ended
    oom: tuple[OomKills, ...] = ()  # processes the kernel killed for memory, per node
    healing: tuple[dict[str, Any], ...] = ()  # losses, replacements, members come and gone (core/members.py)
    members: tuple[dict[str, Any], ...] = ()  # the member jobs (--heal's, grow's)
    time_left_s: float | None = None  # a running job's seconds until SLURM ends it (inf: no limit)
    progress: Progress | None = None  # the newest progress (core/progress.py), None before the first
    stall: dict[str, Any] | None = None  # a running job's open stall (its ``stalled`` event)
    ray_deaths: tuple[RayDeath, ...] = ()  # Ray daemons that died under the job
    parts: dict[str, Any] = field(default_factory=dict)  # a job of parts: each part's nodes and state
    services: dict[str, Any] = field(default_factory=dict)  # ... and each service's instances
    waits_for: str = ""  # a pending job: what it waits for (login/reading/waiting.py)
    queued: JobState | None = field(default=None, compare=False)  # SLURM's, while pending (its start, partition)
    jobs_ahead: int | None = None  # a pending job: jobs of its partition SLURM starts first (with_place)

    @property
    def place(self) -> str:
        """A pending job's place in words: SLURM's estimated start, the jobs ahead of it."""
        return queue_place(self.queued, self.jobs_ahead)

    @property
    def shown_state(self) -> str:
        """The state, and OOM kills beside it (a job that survived them stays COMPLETED)."""
        kills = sum(k.kills for k in self.oom)
        return f"{self.state} ({kills} OOM kill{'s' * (kills != 1)})" if kills else self.state

    def as_dict(self) -> dict[str, Any]:
        extra: dict[str, Any] = {"accounting": self.record.as_dict()} if self.record else {}
        extra["oom_kills"] = [{"node": k.node, "kills": k.kills, "limit": k.limit} for k in self.oom]
        extra["ray_deaths"] = [{"node": d.node, "daemon": d.daemon, "how": d.how, "t": d.t} for d in self.ray_deaths]
        if self.healing or self.members:
            extra.update(healing=list(self.healing), members=list(self.members))
        if self.parts:
            extra.update(parts=self.parts, services=self.services)
        if self.waits_for:
            q = self.queued
            extra.update(waits_for=self.waits_for, expected_start=(q.start or None) if q else None)
            extra.update(jobs_ahead=self.jobs_ahead, partition=(q.partition or None) if q else None)
        return {
            "job_id": self.job_id,
            "job_dir": str(self.paths.job_dir),
            "state": self.state,
            "phase": self.phase,
            "nodes_up": self.nodes_up,
            "nodes": self.nodes,
            "exit_code": self.exit_code,
            "exit_reason": self.exit_reason,
            "cause": None if self.cause is None else self.cause.as_dict(),
            "time_left_s": None
            if self.time_left_s is None or math.isinf(self.time_left_s)
            else round(self.time_left_s),
            "progress": None
            if self.progress is None
            else {"t": self.progress.t, "what": self.progress.what, "age_s": round(self.progress.age())},
            "stall": None if self.stall is None else {**self.stall, "line": stall_line(self.stall)},
            **extra,
        }


def keep_exit(paths: JobPaths, rc: int, reason: str, cause: Cause) -> int | None:
    """The exit of a job whose head died with everything on it, written into its job dir by the
    first `status` that knows it (the job dir stays complete); None where it cannot be written."""
    try:
        record_exit(paths, rc, reason, cause)
    except OSError:
        return None
    return read_exit(paths)[0]


def summarize(paths: JobPaths, state: JobState | None) -> JobSummary:
    """A job as people should see it: its job dir and SLURM's state, decided by core/ending.py
    (never RUNNING beside an exit code; the cause that explains the end, not its last
    consequence)."""
    v = read_job_dir(paths)
    silent = silent_nodes(paths, state.nodelist) if state is not None and state.state == "NODE_FAIL" else None
    ending = decide(
        Evidence(
            state.state if state else None,
            state is not None and state.in_queue,
            state is not None and state.finished,
            v.exit_code,
            v.exit_reason,
            read_cause(paths),
            v.lost,
            silent,
            v.oom,
            v.ray_deaths,
            human_time_limit(v.manifest.time if v.manifest else None),
        )
    )
    slurm_state, exit_code, exit_reason = ending.state, ending.exit_code, ending.reason
    if ending.keep is not None:  # nothing on the nodes could write it
        exit_code = keep_exit(paths, *ending.keep)
    grown = sum(len(nodes_now(m)) for m in v.members if m["kind"] == GROW)
    nodes = (v.manifest.total_nodes if v.manifest else 0) + grown  # `grow`'s members, while in the job
    stall = v.stall if slurm_state == "RUNNING" else None
    return JobSummary(
        v.job_id,
        paths,
        slurm_state,
        "stalled" if stall else v.phase,
        v.nodes_up,
        nodes,
        exit_code,
        exit_reason,
        cause=ending.cause,
        oom=v.oom,
        healing=v.healing,
        members=v.members,
        time_left_s=read_time_left(paths.end_time) if slurm_state == "RUNNING" else None,
        progress=last_progress(paths.job_dir),
        stall=stall,
        ray_deaths=v.ray_deaths,
        waits_for=waits_for(state, v.manifest.parts if v.manifest else {}),
        queued=state if state is not None and state.state == "PENDING" else None,
        **(status_fields(paths.job_dir, v.manifest.parts, v.phase) if v.manifest and v.manifest.parts else {}),  # type: ignore[arg-type]
    )


def with_place(summary: JobSummary, client: SlurmClient) -> JobSummary:
    """A pending job's summary with how many jobs of its partition go first (one squeue call)."""
    if summary.queued is None:
        return summary
    return replace(summary, jobs_ahead=client.jobs_ahead(summary.queued))


def with_record(summary: JobSummary, client: SlurmClient) -> JobSummary:
    """An ended SLURM job's summary with what SLURM's accounting kept (elapsed, memory per
    node), where the site keeps it."""
    if is_local(summary.job_id) or JobState(summary.job_id, summary.state.split()[0]).in_queue:
        return summary
    return replace(summary, record=client.accounting(summary.job_id))


def end_line(summary: JobSummary) -> str:
    """How a job ended, for people: state, exit code and reason; on a failure the last lines of
    the driver's traceback; where the driver log is."""
    paths = summary.paths
    reason = summary.exit_reason or _batch_log_reason(paths.batch_log)
    lines = [f"job {summary.job_id}: {summary.state}, exit code {summary.exit_code}: {reason}"]
    if summary.cause is not None and summary.cause.kind != COMPLETED:
        lines.append(f"  cause: {summary.cause.words()}")
    error = last_traceback(paths.driver_log) if summary.exit_code not in (0, None) else []
    if error:
        lines.append("  the driver's error (last lines of its traceback):")
        lines += [f"    {line}" for line in error]
    lines.append(f"  driver log: {paths.driver_log}")
    return "\n".join(lines)


def _batch_log_reason(batch_log: Path) -> str:
    """For a job that died before slurm-rl could say why: the last lines SLURM wrote."""
    try:
        tail = [line for line in batch_log.read_text(errors="replace").splitlines() if line.strip()][-3:]
    except FileNotFoundError:
        return f"the job ended before writing {batch_log}"
    return f"the job ended before slurm-rl started on every node; {batch_log} ends with: " + " | ".join(tail)
