"""The job's nodes and members, watched from the head's Ray node table (every job; docs/healing.md).

Growing (``slurm-rl grow``): a grown member's node joining is ``member_joined``; its loss
(shrunk, preempted, failed) is ``member_left``, never healed: the job goes on. A shrink request
(``members/N.shrink``) drains member N's Ray nodes (no new work there) before `shrink` cancels it.

Healing (``--heal K``): a worker node lost from Ray (its raylet declared dead by
the head's GCS, ~10 s after the node died: job/ray_start.py's health check, not SLURM's
SlurmdTimeout) is replaced by a member job, up to K times; past that, or when no replacement
joins within ``--heal-timeout``, the job fails fast, saying why.

The head may run inside a container, where there is no SLURM client: it writes the request
(``members/N.request``) and the batch script, on the bare batch host, submits member job N
(templates/heal.sh.j2), which starts the node bootstrap as a worker of this job with rank
``N * 1000`` (core/job_env.py). Its join is its Ray node alive in the GCS (named by the
``node_start`` event that the member's bootstrap writes before it starts Ray).

Events, with the seconds since the loss was seen: ``node_lost``, ``replacement_requested``,
(the batch script's ``member_submitted``), ``replacement_joined``. Without ``--heal`` a lost
node of the job itself is SLURM's to handle (the step's --kill-on-bad-exit ends the job)."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any

from ..core import causes as c
from ..core.causes import Cause
from ..core.events import read_events, write_atomic
from ..core.job_env import MEMBER_RANK_BASE
from ..core.members import GROW, HEAL, Request, claim_member, read_request
from .context import NodeContext

POLL_S = 1.0
WATCH_STOPPED = "the member watch (healing, members joining and leaving) stopped by an unexpected error"
PENDING_POLL_S = 0.25  # while a replacement is on its way: its join is recorded within this


@dataclass
class Replacement:
    """A replacement on its way (``MemberWatch.pending`` keys it by its member number)."""

    replaces: str
    seen_lost: float  # time.monotonic() when the loss was seen
    deadline: float
    why: str = "was lost"  # what happened to the node it replaces, for a failure's words
    cause: Cause | None = None  # the job's cause if it fails (node lost (NODE) unless given)


class MemberWatch:
    """Watches the job's Ray nodes from the head: members joining and leaving, shrinks to drain,
    losses to replace (--heal), past K a failed job."""

    def __init__(self, ctx: NodeContext, address: str) -> None:
        self.ctx = ctx
        self.address = address
        self.alive: dict[str, tuple[str, int]] = {}  # Ray node id (hex) -> (SLURM node name, rank)
        self.lost: list[str] = []
        self.retired: set[str] = set()  # nodes told to leave (preflight found them bad): no loss
        self.lock = threading.Lock()  # one round of the watch, or node 0's retire, at a time
        self.pending: dict[int, Replacement] = {}
        self.used = 0
        self.kinds: dict[int, str] = {}  # member number -> its kind (its request file's)
        self.drained: set[int] = set()
        self.client: Any = None

    @property
    def limit(self) -> int:
        return self.ctx.manifest.heal

    def run(self) -> None:
        """The thread's body: until the job stops."""
        from ray._raylet import GcsClient  # type: ignore[attr-defined]

        self.client = client = GcsClient(address=self.address)
        while not self.ctx.stop_requested.wait(PENDING_POLL_S if self.pending else POLL_S):
            try:
                infos = client.get_all_node_info(timeout=2)
            except Exception:  # noqa: BLE001 - our own GCS busy: next round
                continue
            try:
                with self.lock:
                    self.observe(
                        {nid.hex(): (info.state == 0, info.node_manager_address) for nid, info in infos.items()}
                    )
                    self.check_pending()
                    self.check_shrinks()
            except Exception as exc:  # noqa: BLE001 - said where people look, never silent
                self.ctx.say(f"{WATCH_STOPPED}: {exc!r}")
                self.ctx.event("heal_error", error=repr(exc))
                return

    def observe(self, nodes: dict[str, tuple[bool, str]]) -> None:
        """One look at Ray's node table ({node id: (alive, ip)}): new nodes are named (a
        replacement's is its join), nodes that were alive and are dead now are losses."""
        names: dict[str, tuple[str, int]] | None = None
        for node_id, (alive, ip) in sorted(nodes.items()):
            if alive and node_id not in self.alive:
                names = names if names is not None else self.node_names()
                name, rank = names.get(ip, (ip, -1))
                self.alive[node_id] = (name, rank)
                n = rank // MEMBER_RANK_BASE
                if n in self.pending:
                    self.on_joined(n, name)
                elif n >= 1 and self.kind(n) == GROW:
                    self.ctx.say(f"{name} (member job {n}) joined the job")
                    self.ctx.event("member_joined", member=n, joined=name, kind=GROW)
            elif not alive and node_id in self.alive:
                name, rank = self.alive.pop(node_id)
                n = rank // MEMBER_RANK_BASE
                if n >= 1 and self.kind(n) == GROW:
                    self.on_member_left(n, name)
                elif name in self.retired:
                    self.ctx.event("node_left", left=name, why="preflight found it bad; replaced")
                elif self.limit:
                    self.on_lost(name)

    def kind(self, n: int) -> str:
        if n not in self.kinds:
            request = read_request(self.ctx.paths.members, n)
            self.kinds[n] = request.kind if request else HEAL
        return self.kinds[n]

    def on_member_left(self, n: int, node: str) -> None:
        """A grown member's node left: shrunk, preempted, failed or ended. The job goes on."""
        why = (
            "shrunk"
            if (self.ctx.paths.members / f"{n}.shrink").exists()
            else "gone from Ray (preempted, failed or ended)"
        )
        self.ctx.say(f"{node} (member job {n}) left the job: {why}")
        self.ctx.event("member_left", member=n, left=node, why=why, kind=GROW)

    def check_shrinks(self) -> None:
        """`slurm-rl shrink` asked member N to leave: Ray places no new work on its nodes, then
        `shrink` cancels it (told by ``N.drained``)."""
        for path in self.ctx.paths.members.glob("*.shrink") if self.ctx.paths.members.is_dir() else []:
            n = int(path.stem) if path.stem.isdigit() else 0
            if n < 1 or n in self.drained:
                continue
            self.drained.add(n)
            ids = [nid for nid, (_, rank) in self.alive.items() if rank // MEMBER_RANK_BASE == n]
            names = [self.alive[nid][0] for nid in ids]
            for nid in ids:
                self.drain(nid)
            write_atomic(self.ctx.paths.members / f"{n}.drained", " ".join(names) + "\n")
            self.ctx.event("member_draining", member=n, nodes=names, kind=GROW)

    def drain(self, node_id: str) -> None:
        from ray.core.generated import autoscaler_pb2

        reason = autoscaler_pb2.DrainNodeReason.DRAIN_NODE_REASON_PREEMPTION  # type: ignore[attr-defined]
        try:  # no deadline: the member's cancel ends the node
            self.client.drain_node(node_id, reason, "slurm-rl shrink: this member job leaves the job", 0, timeout=5)
        except Exception as exc:  # noqa: BLE001 - best effort: the cancel ends the node anyway
            self.ctx.say(f"draining Ray node {node_id} failed ({exc!r}); its member is cancelled anyway")

    def node_names(self) -> dict[str, tuple[str, int]]:
        """IP -> (node name, rank), from this attempt's ``node_start`` events (members' too)."""
        return {
            str(e.get("ip")): (str(e.get("node")), int(e.get("rank", -1)))
            for e in read_events(self.ctx.paths.events)
            if e.get("event") == "node_start" and e.get("attempt") == self.ctx.attempt
        }

    def on_lost(self, node: str) -> None:
        ctx = self.ctx
        if ctx.stop_flag.exists():  # the driver ended: the nodes leave as node 0 told them to
            return
        self.lost.append(node)
        ctx.say(f"node {node} lost (Ray declared its raylet dead)")
        ctx.event("node_lost", lost=node, replacements_used=self.used, heal=self.limit)
        if node == ctx.node:
            return  # our own Ray node: the job ends on its own
        if self.used >= self.limit:
            ctx.fail(
                f"node {node} was lost and the job has used its {self.limit} replacement(s) "
                f"(--heal {self.limit}; lost so far: {', '.join(self.lost)})",
                Cause(c.NODE_LOST, node),
            )
            return
        self.used += 1
        self.replace(node)

    @property
    def left(self) -> int:
        """Replacements the job may still ask for (--heal K)."""
        return max(0, self.limit - self.used)

    def retire(self, node: str, why: str, cause: Cause) -> int:
        """``node`` leaves the job on node 0's word (preflight found it bad): its Ray going away
        is no loss, and a member job replaces it; the replacement's member number."""
        with self.lock:
            self.retired.add(node)
            self.used += 1
            return self.replace(node, why, cause)

    def waiting_for(self, members: list[int]) -> bool:
        """Whether any of ``members`` is still on its way (not joined; a failed one fails the job)."""
        with self.lock:
            return any(n in self.pending for n in members)

    def replace(self, node: str, why: str = "was lost", cause: Cause | None = None) -> int:
        """Ask for member job N to replace ``node`` (one replacement of the K already counted)."""
        ctx = self.ctx
        # never a node the job has or had: a replacement shares no node (nor its temp dir) with the job
        ours = sorted({*ctx.nodes, *(name for name, _ in self.alive.values()), *self.lost})
        exclude = ",".join(filter(None, [ctx.manifest.exclude or "", *ours]))
        n = claim_member(ctx.paths.members, Request(1, exclude, HEAL))
        self.kinds[n] = HEAL
        now = time.monotonic()
        self.pending[n] = Replacement(node, now, now + ctx.manifest.heal_timeout_s, why, cause)
        ctx.say(f"asked for a replacement of {node}: member job {n} (excluding {exclude})")
        ctx.event("replacement_requested", member=n, replaces=node, exclude=exclude)
        return n

    def on_joined(self, n: int, node: str) -> None:
        """Member ``n``'s node is alive in Ray: Ray places the lost node's bundles there now."""
        ctx, want = self.ctx, self.pending.pop(n)
        seconds = round(time.monotonic() - want.seen_lost, 1)
        write_atomic(ctx.paths.members / f"{n}.joined", node + "\n")
        ctx.say(f"{node} (member job {n}) replaced {want.replaces}, {seconds} s after the loss")
        ctx.event("replacement_joined", member=n, joined=node, replaces=want.replaces, seconds=seconds)

    def check_pending(self) -> None:
        """A replacement that SLURM refused, that ended unjoined, or that is late fails the job."""
        for n, want in list(self.pending.items()):
            error = self.ctx.paths.members / f"{n}.error"
            cause = want.cause or Cause(c.NODE_LOST, want.replaces)
            if error.exists():
                why = error.read_text(errors="replace").strip().splitlines() or ["no reason given"]
                self.ctx.fail(
                    f"node {want.replaces} {want.why} and its replacement (member job {n}) failed: {why[-1]}", cause
                )
            elif time.monotonic() > want.deadline:
                self.ctx.fail(
                    f"node {want.replaces} {want.why} and no replacement joined within "
                    f"{self.ctx.manifest.heal_timeout_s:g} s (--heal-timeout; member job {n}: "
                    f"{self.ctx.paths.member_log(n)})",
                    cause,
                )
