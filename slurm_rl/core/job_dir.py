"""What a job dir says about its job, read in one go (for `status`, `list`, `--wait`): its id,
its phase (the furthest lifecycle event), nodes up, the exit code and reason once known, the
manifest, the nodes of the last attempt that never reported an end, the OOM kills and the Ray
daemons that died."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .errors import JobError
from .events import read_events
from .exits import OomKills, RayDeath, oom_kills, ray_deaths, read_exit
from .job_env import MEMBER_RANK_BASE
from .job_ids import JobId, parse_job_id
from .manifest import JobManifest, load_manifest
from .members import joined_nodes, member_history, member_jobs
from .nodelist import expand_hostlist
from .paths import JobPaths
from .progress import open_stall

PHASES = [
    "submitted",
    "node_start",
    "node_up",
    "ready",
    "driver_start",
    "driver_connected",
    "driver_end",
    "node_cleaned",
    "job_end",
]


@dataclass(frozen=True)
class JobDirView:
    job_id: JobId
    phase: str
    nodes_up: int
    exit_code: int | None
    exit_reason: str
    manifest: JobManifest | None
    lost: list[str]  # nodes of the last attempt whose bootstrap never said how it ended
    oom: tuple[OomKills, ...]
    healing: tuple[dict[str, Any], ...] = ()  # members: losses, requests, joins, leaves, restores
    members: tuple[dict[str, Any], ...] = ()  # member jobs (core/members.py): --heal's and grow's
    stall: dict[str, Any] | None = None  # the open ``stalled`` event (core/progress.py), if any
    ray_deaths: tuple[RayDeath, ...] = ()  # Ray daemons that died under the job (job/ray_watch.py)


def read_job_dir(paths: JobPaths) -> JobDirView:
    events = read_events(paths.events)
    phase = "submitted"
    for ev in events:
        if int(ev.get("rank") or 0) >= MEMBER_RANK_BASE:
            continue  # a member's node: its start, failure or end is its own, not the job's phase
        if ev.get("event") in PHASES and PHASES.index(ev["event"]) > PHASES.index(phase):
            phase = ev["event"]
        if ev.get("event") == "node_failed":
            phase = "failed"
            break
    up = len(joined_nodes(events))
    exit_code, exit_reason = read_exit(paths)
    return JobDirView(
        parse_job_id(paths.job_id),
        phase,
        up,
        exit_code,
        exit_reason,
        _manifest_or_none(paths),
        lost_nodes(events),
        tuple(oom_kills(events)),
        tuple(member_history(events)),
        tuple(member_jobs(events)),
        open_stall(events),
        tuple(ray_deaths(events)),
    )


def _manifest_or_none(paths: JobPaths) -> JobManifest | None:
    try:
        return load_manifest(paths.manifest)
    except JobError:
        return None


NODE_ENDS = ("node_cleaned", "node_stopped", "node_failed")
# a bootstrap that acted on SLURM's stop signal (job/node_lifecycle.py) was alive when the job's end
# reached it: SLURM's kill KillWait later (or a cgroup's, after a node failure) may take it before
# it writes one of NODE_ENDS, and it is then no lost node
STOP_HEARD = "stop_heard"


def last_attempt(events: list[dict[str, Any]]) -> int | None:
    """The attempt the last node_start belongs to; None before any node started."""
    return max((e.get("attempt", 0) for e in events if e.get("event") == "node_start"), default=None)


def lost_nodes(events: list[dict[str, Any]]) -> list[str]:
    """Nodes of the last attempt whose bootstrap started and never said how it ended, nor that
    SLURM's stop reached it: the node died (or SLURM lost it) with everything on it. Every other
    end writes one of NODE_ENDS, or STOP_HEARD first."""
    last = last_attempt(events)
    if last is None:
        return []
    started = {e.get("node") for e in events if e.get("event") == "node_start" and e.get("attempt", 0) == last}
    return sorted(str(n) for n in started - ended_nodes(events) if n)


def ended_nodes(events: list[dict[str, Any]]) -> set[str]:
    """Nodes of the last attempt whose bootstrap said how it ended (one of NODE_ENDS) or heard
    SLURM's stop (STOP_HEARD)."""
    last = last_attempt(events) or 0
    said = (*NODE_ENDS, STOP_HEARD)
    ends = (e for e in events if e.get("event") in said and e.get("attempt", 0) == last)
    return {str(e["node"]) for e in ends if e.get("node")}


def silent_nodes(paths: JobPaths, nodelist: str) -> list[str] | None:
    """SLURM's nodes of a job (``nodelist``) whose bootstrap never said how it ended; None where
    SLURM named none."""
    if not nodelist:
        return None
    ended = ended_nodes(read_events(paths.events))
    return [n for n in expand_hostlist(nodelist) if n not in ended]


def cleaned_nodes(events: list[dict[str, Any]]) -> set[str]:
    """Nodes of the last attempt whose bootstrap cleaned up at the job's end (``node_cleaned``:
    it stopped every process of the job there and removed its node-local files)."""
    last = last_attempt(events) or 0
    cleaned = (e for e in events if e.get("event") == "node_cleaned" and e.get("attempt", 0) == last)
    return {str(e["node"]) for e in cleaned if e.get("node")}
