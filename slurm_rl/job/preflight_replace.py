"""Preflight under --heal K (docs/causes.md): a worker node preflight found bad leaves the job and
a member job replaces it, as a lost node is replaced (member_watch.py), instead of the whole job
going again without it (a requeue: SLURM's requeue delay and a queue wait). Node 0 names the
nodes that leave in one file per attempt (``markers/A-preflight-leave``, empty when none do,
written once the verdict is in): a node named there stops and exits 0, joined or not (a node
whose fabric is down never reached the head's GCS, so the word is a file in the job dir), and
the driver starts once every replacement joined. The head's own node, or more bad nodes than
replacements left, go the usual way: the job goes again without them. A replacement is not
preflighted itself: it joins a Ray cluster whose collective was already checked."""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING

from ..core import causes as c
from ..core.causes import Cause
from ..core.events import write_atomic
from ..core.job_env import MEMBER_RANK_BASE
from ..core.node_verdict import NodeResult
from ..core.retries import add_bad_nodes
from .context import NodeContext

if TYPE_CHECKING:
    from .member_watch import MemberWatch

LEAVE_POLL_S = 0.5  # a worker reads node 0's word this often until it is in (one small file)
VERDICT_WAIT_S = 30.0  # a bad node whose Ray failed waits this long for node 0's word
OWN_RESULT_WAIT_S = 5.0  # ... once its own checks are in and found it bad (they come in a second)
LEAVING = "preflight found this node bad: it leaves the job and a member job replaces it (--heal)"


def heals(ctx: NodeContext) -> bool:
    """Whether this job replaces the nodes preflight finds bad (--preflight, --heal K, exclude)."""
    m = ctx.manifest
    return bool(m.preflight and m.heal and m.on_bad_node == "exclude")


def a_worker(ctx: NodeContext) -> bool:
    return 0 < ctx.rank < MEMBER_RANK_BASE


def replaceable(ctx: NodeContext, nodes: list[str], members: MemberWatch) -> bool:
    """Worker nodes only (the head's node runs the Ray head and the driver), within K."""
    return heals(ctx) and ctx.nodes[0] not in nodes and len(nodes) <= members.left


def publish_leaving(ctx: NodeContext, nodes: list[str]) -> None:
    if heals(ctx):
        write_atomic(ctx.paths.preflight_leave(ctx.attempt), "".join(f"{n}\n" for n in nodes))


def leaving(ctx: NodeContext) -> list[str] | None:
    """The nodes node 0 told to leave; None while its verdict is not in."""
    try:
        return ctx.paths.preflight_leave(ctx.attempt).read_text().split()
    except FileNotFoundError:
        return None


def replace_bad(ctx: NodeContext, members: MemberWatch, bad: tuple[tuple[str, str, str], ...]) -> bool:
    """Node 0: each bad node leaves and a member job replaces it; True once every replacement
    joined (one that fails or is late fails the job, member_watch.py: Stopped here)."""
    t0 = time.monotonic()
    first: dict[str, tuple[str, str]] = {}
    for node, check, what in bad:
        first.setdefault(node, (check, what))
    nodes = list(first)
    add_bad_nodes(ctx.paths, nodes)  # no later attempt (a --requeue) is given them either
    wanted = [
        members.retire(node, f"failed the check {check} ({what})", Cause(c.PREFLIGHT, node, check=check))
        for node, (check, what) in first.items()
    ]
    publish_leaving(ctx, nodes)
    found = "; ".join(f"{node} failed the check {check}: {what}" for node, (check, what) in first.items())
    ctx.say(f"preflight: {found}; replaced by member job(s) {', '.join(map(str, wanted))} (--heal)")
    ctx.event("preflight_replacing", nodes=nodes, members=wanted, found=found)
    ctx.wait_until(lambda: not members.waiting_for(wanted), float("inf"), "the replacements of " + ", ".join(nodes))
    seconds = round(time.monotonic() - t0, 1)
    ctx.say(f"preflight: every replacement joined, {seconds} s after the verdict; the driver starts")
    ctx.event("preflight_replaced", nodes=nodes, members=wanted, seconds=seconds)
    return True


class LeaveWatch:
    """A worker's ear for node 0's word, polled by its lifecycle loop until the word is in."""

    def __init__(self, ctx: NodeContext) -> None:
        self.ctx = ctx
        self.active = heals(ctx) and a_worker(ctx)
        self.next = 0.0

    def told(self) -> bool:
        """True once, when node 0 named this node among those that leave."""
        now = time.monotonic()
        if not self.active or now < self.next:
            return False
        self.next = now + LEAVE_POLL_S
        names = leaving(self.ctx)
        if names is None:
            return False
        self.active = False
        return self.ctx.node in names


def own_result_bad(ctx: NodeContext) -> bool:
    try:
        marker = ctx.paths.node_marker(ctx.attempt, ctx.rank, "preflight")
        return not all(ch.ok for ch in NodeResult.from_dict(json.loads(marker.read_text())).checks)
    except (OSError, ValueError, KeyError):
        return False


def wait_replaced(ctx: NodeContext) -> bool:
    """A worker whose role failed (its Ray could not start on the full disk preflight found):
    whether node 0 replaces it, waited for only when this node's own checks found it bad."""
    if not (heals(ctx) and a_worker(ctx)):
        return False
    t0 = time.monotonic()
    while time.monotonic() - t0 < VERDICT_WAIT_S and not ctx.stop_flag.exists():
        names = leaving(ctx)
        if names is not None:
            return ctx.node in names
        if time.monotonic() - t0 > OWN_RESULT_WAIT_S and not own_result_bad(ctx):
            return False  # its own checks good, or never in: the failure is its own
        time.sleep(0.25)
    return False
