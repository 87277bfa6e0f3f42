"""The driver's view of its job's members (docs/healing.md): ``slurm_rl.members()`` lists them,
``slurm_rl.on_member_change(callback)`` hears them come and go, ``slurm_rl.nodes()`` is the
job's node list now, so a driver can rebalance its rollout workers onto grown nodes and off
preempted ones.

Both read the job's events (the head's watcher, job/member_watch.py, writes a member's nodes joining
and leaving the Ray cluster; `slurm-rl grow` and the batch script write its submission). Outside
a slurm-rl job there are no members: an empty list, and a callback that never fires."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..core.events import read_events, read_json
from ..core.job_env import JobEnvironment
from ..core.members import gone_nodes, member_jobs, nodes_now
from ..core.paths import JobPaths

# what a callback hears: a member's node joined or left, a replacement joined, a node was lost
CHANGES = ("member_joined", "member_left", "replacement_joined", "node_lost")


@dataclass(frozen=True)
class Member:
    member: int  # its number in the job (1, 2, ...)
    kind: str  # "grow" (slurm-rl grow) or "heal" (a replacement, --heal)
    slurm_job: int | str | None
    state: str  # requested, submitted, joined, left or refused
    nodes: list[str] = field(default_factory=list)  # its nodes in the job's Ray cluster now
    replaces: str | None = None  # a replacement's lost node


def _events() -> list[dict[str, Any]]:
    job_dir = JobEnvironment.current().job_dir
    return read_events(JobPaths(job_dir).events) if job_dir else []


def members() -> list[Member]:
    """This job's member jobs, as they stand now, with the nodes each has in the Ray cluster."""
    return _members(_events())


def _members(events: list[dict[str, Any]]) -> list[Member]:
    return [
        Member(m["member"], m["kind"], m["slurm_job"], m["state"], nodes_now(m), m["replaces"])
        for m in member_jobs(events)
    ]


def nodes() -> list[str]:
    """The job's nodes now: its own (less those lost, --heal) and its members' that are in its
    Ray cluster, in that order. Outside a slurm-rl job: this host's name."""
    job_dir = JobEnvironment.current().job_dir
    if not job_dir:
        import socket

        return [socket.gethostname()]
    events = _events()
    own = list((read_json(JobPaths(job_dir).cluster) or {}).get("nodes") or [])
    grown = [n for m in _members(events) for n in m.nodes]
    gone = gone_nodes(events)
    return [n for n in dict.fromkeys([*own, *grown]) if n not in gone]


def on_member_change(callback: Callable[[dict[str, Any]], None], poll_s: float = 1.0) -> threading.Event:
    """Call ``callback(event)`` for each change from now on, from a daemon thread polling every
    ``poll_s`` s; ``event`` is a dict: ``event`` (one of CHANGES), ``t``, and ``member`` with
    ``joined`` or ``left`` (the node) for a member, ``lost`` for a lost node of the job (--heal).
    Returns an Event: set it to stop listening."""
    stop = threading.Event()
    seen = len(_events())

    def listen() -> None:
        nonlocal seen
        while not stop.wait(poll_s):
            events = _events()
            for e in events[seen:]:
                if e.get("event") in CHANGES:
                    try:
                        callback(e)
                    except Exception as exc:  # noqa: BLE001 - the driver's bug: said, listening goes on
                        print(f"slurm_rl.on_member_change: the callback raised {exc!r}", flush=True)
            seen = len(events)

    threading.Thread(target=listen, name="slurm-rl-members", daemon=True).start()
    return stop
