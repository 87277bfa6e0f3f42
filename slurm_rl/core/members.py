"""A job's member jobs (docs/healing.md): SLURM jobs whose nodes join the job's Ray cluster, as a
replacement for a lost node (``--heal``, kind ``heal``) or to grow it (``slurm-rl grow``, kind
``grow``). Member N's files live in the job dir's ``members/``: ``N.request`` (``NODES EXCLUDE
KIND``), ``N.job`` (its SLURM id), ``N.error``, ``N.joined``, ``N.shrink`` (asked to leave) and
its log ``logs/member-N.log``; its history is in the job's events. Read here for `status`,
`teardown`, the driver's ``slurm_rl.members()`` and the head's watcher."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

GROW = "grow"
HEAL = "heal"

MEMBER_EVENTS = (
    "node_lost",
    "replacement_requested",
    "member_submitted",
    "member_refused",
    "replacement_joined",
    "member_joined",
    "member_draining",
    "member_left",
    "workers_restored",
    "heal_error",
    "preflight_replacing",  # --preflight under --heal: a bad worker node replaced before the driver
    "preflight_replaced",
    "node_left",
)


@dataclass(frozen=True)
class Request:
    nodes: int
    exclude: str  # "" for none
    kind: str  # HEAL or GROW


def claim_member(members: Path, request: Request) -> int:
    """The next free member number, taken by creating its request file exclusively: the head's
    watcher (a replacement) and `slurm-rl grow` (on a login node) never take the same one. Numbers
    go on across a requeued job's attempts (the dir keeps the earlier members' files)."""
    members.mkdir(parents=True, exist_ok=True)
    n = 1 + max((int(p.name.split(".")[0]) for p in members.iterdir() if p.name.split(".")[0].isdigit()), default=0)
    while True:
        try:
            fd = os.open(members / f"{n}.request", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            n += 1
            continue
        with os.fdopen(fd, "w") as f:
            f.write(f"{request.nodes} {request.exclude or '-'} {request.kind}\n")
        return n


def read_request(members: Path, n: int) -> Request | None:
    try:
        words = (members / f"{n}.request").read_text().split()
    except (FileNotFoundError, OSError):
        return None
    if len(words) < 2 or not words[0].isdigit():
        return None
    return Request(int(words[0]), "" if words[1] == "-" else words[1], words[2] if len(words) > 2 else HEAL)


def lost_to_healing(events: list[dict[str, Any]]) -> set[str]:
    """Nodes a healing job (--heal) saw lost: gone with everything on them, out of its allocation."""
    return {str(e["lost"]) for e in events if e.get("event") == "node_lost" and e.get("lost")}


JOIN_EVENTS = ("member_joined", "replacement_joined")  # ``joined``: a member's node in the job's Ray


def _in_or_out(e: dict[str, Any]) -> tuple[str, bool] | None:
    """(node, True) for an event that brings a node into the job's Ray, (node, False) for one
    that takes it out, None for the rest."""
    name = e.get("event")
    if name == "node_lost" and e.get("lost"):
        return str(e["lost"]), False
    if name == "member_left" and e.get("left"):
        return str(e["left"]), False
    node = e.get("node") if name == "node_up" else e.get("joined") if name in JOIN_EVENTS else None
    return (str(node), True) if node else None


def gone_nodes(events: list[dict[str, Any]]) -> set[str]:
    """Nodes no longer in the job: lost ones (--heal) and grown members' that left (shrunk,
    preempted, lost), unless a later member joined on the same node again."""
    return {n for n, now_in in _last_in_or_out(events).items() if not now_in}


def joined_nodes(events: list[dict[str, Any]]) -> set[str]:
    """Nodes in the job's Ray now: those whose bootstrap said ``node_up`` or that the driver saw
    join as a member (its ``member_joined`` can come before the node's own ``node_up``), less
    those gone since."""
    return {n for n, now_in in _last_in_or_out(events).items() if now_in}


def _last_in_or_out(events: list[dict[str, Any]]) -> dict[str, bool]:
    last: dict[str, bool] = {}
    for e in events:
        seen = _in_or_out(e)
        if seen is not None:
            last[seen[0]] = seen[1]
    return last


def nodes_now(member: dict[str, Any]) -> list[str]:
    """A member's nodes in the job's Ray cluster now (one of member_jobs' entries)."""
    return [n for n in member["nodes"] if n not in member["left"]]


def member_history(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A job's losses, replacements and members coming and going, in order, as the events say them."""
    drop = ("host", "rank", "attempt")
    return [{k: v for k, v in e.items() if k not in drop} for e in events if e.get("event") in MEMBER_EVENTS]


def member_jobs(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Member jobs: number, kind, SLURM id, the node a replacement replaces, the nodes that joined
    (``node``: the first) and those that left since, the state (``requested``, ``submitted``,
    ``joined``, ``refused`` or ``left``, with ``why``)."""
    members: dict[int, dict[str, Any]] = {}
    for e in events:
        name, n = e.get("event"), e.get("member")
        if not isinstance(n, int) or name not in MEMBER_EVENTS:
            continue
        entry = members.setdefault(
            n,
            {"member": n, "kind": HEAL, "slurm_job": None, "replaces": None, "node": None, "nodes": [], "left": []},
        )
        entry["kind"] = e.get("kind") or entry["kind"]  # grow's events say it; a replacement's never
        if name == "replacement_requested":
            entry["replaces"] = e.get("replaces")
        elif name == "member_submitted":
            sid = e.get("slurm_job")
            entry["slurm_job"] = int(str(sid)) if str(sid or "").isdigit() else sid
        elif name in ("replacement_joined", "member_joined"):
            entry["nodes"].append(e.get("joined"))
            entry["node"] = entry["node"] or e.get("joined")
        elif name == "member_left":
            entry["left"].append(e.get("left"))
            entry["why"] = e.get("why")
        entry["state"] = _state(name, entry)
    return [members[n] for n in sorted(members)]


def _state(event: str, entry: dict[str, Any]) -> str:
    if event == "member_refused" or entry.get("state") == "refused":
        return "refused"
    if entry["nodes"]:
        return "joined" if nodes_now(entry) else "left"
    return "submitted" if entry["slurm_job"] is not None else "requested"
