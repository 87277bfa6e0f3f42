"""Healing (``--heal K``), on the head: a worker node lost from Ray (its raylet declared dead by
the head's GCS, ~10 s after the node died: job/ray_start.py's health check, not SLURM's
SlurmdTimeout) is replaced by a member job, up to K times; past that, or when no replacement
joins within ``--heal-timeout``, the job fails fast, saying why.

The head may run inside a container, where there is no SLURM client: it writes the request
(``members/N.request``) and the batch script, on the bare batch host, submits member job N
(templates/heal.sh.j2), which starts the node bootstrap as a worker of this job with rank
``N * 1000`` (core/job_env.py). Its join is its Ray node alive in the GCS (named by the
``node_start`` event that the member's bootstrap writes before it starts Ray).

Events, with the seconds since the loss was seen: ``node_lost``, ``replacement_requested``,
(the batch script's ``member_submitted``), ``replacement_joined``."""

from __future__ import annotations

import time
from dataclasses import dataclass

from ..core.events import read_events, write_atomic
from ..core.job_env import MEMBER_RANK_BASE
from .context import NodeContext

POLL_S = 1.0
PENDING_POLL_S = 0.25  # while a replacement is on its way: its join is recorded within this


@dataclass
class Replacement:
    """A replacement on its way (``Healer.pending`` keys it by its member number)."""

    replaces: str
    seen_lost: float  # time.monotonic() when the loss was seen
    deadline: float


class Healer:
    """Watches the job's Ray nodes from the head; asks for replacements; fails the job past K."""

    def __init__(self, ctx: NodeContext, address: str) -> None:
        self.ctx = ctx
        self.address = address
        self.alive: dict[str, str] = {}  # Ray node id (hex) -> SLURM node name
        self.lost: list[str] = []
        self.pending: dict[int, Replacement] = {}
        self.used = 0

    @property
    def limit(self) -> int:
        return self.ctx.manifest.heal

    def run(self) -> None:
        """The thread's body: until the job stops."""
        from ray._raylet import GcsClient  # type: ignore[attr-defined]

        client = GcsClient(address=self.address)
        while not self.ctx.stop_requested.wait(PENDING_POLL_S if self.pending else POLL_S):
            try:
                infos = client.get_all_node_info(timeout=2)
            except Exception:  # noqa: BLE001 - our own GCS busy: next round
                continue
            try:
                self.observe({nid.hex(): (info.state == 0, info.node_manager_address) for nid, info in infos.items()})
                self.check_pending()
            except Exception as exc:  # noqa: BLE001 - said where people look, never silent
                self.ctx.say(f"healing stopped by an unexpected error: {exc!r}")
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
                self.alive[node_id] = name
                if rank // MEMBER_RANK_BASE in self.pending:
                    self.on_joined(rank // MEMBER_RANK_BASE, name)
            elif not alive and node_id in self.alive:
                self.on_lost(self.alive.pop(node_id))

    def node_names(self) -> dict[str, tuple[str, int]]:
        """IP -> (node name, rank), from this attempt's ``node_start`` events (members' too)."""
        return {
            str(e.get("ip")): (str(e.get("node")), int(e.get("rank", -1)))
            for e in read_events(self.ctx.paths.events)
            if e.get("event") == "node_start" and e.get("attempt") == self.ctx.attempt
        }

    def on_lost(self, node: str) -> None:
        ctx = self.ctx
        self.lost.append(node)
        ctx.say(f"node {node} lost (Ray declared its raylet dead)")
        ctx.event("node_lost", lost=node, replacements_used=self.used, heal=self.limit)
        if node == ctx.node:
            return  # our own Ray node: the job ends on its own
        if self.used >= self.limit:
            ctx.fail(
                f"node {node} was lost and the job has used its {self.limit} replacement(s) "
                f"(--heal {self.limit}; lost so far: {', '.join(self.lost)})"
            )
            return
        ctx.paths.members.mkdir(exist_ok=True)
        self.used += 1
        # member numbers go on across attempts (a requeued job's dir keeps the earlier members' files)
        n = 1 + max((int(p.stem) for p in ctx.paths.members.glob("*.request") if p.stem.isdigit()), default=0)
        # never a node the job has or had: a replacement shares no node (nor its temp dir) with the job
        ours = sorted({*ctx.nodes, *self.alive.values(), *self.lost})
        exclude = ",".join(filter(None, [ctx.manifest.exclude or "", *ours]))
        write_atomic(ctx.paths.members / f"{n}.request", f"1 {exclude or '-'}\n")
        now = time.monotonic()
        self.pending[n] = Replacement(node, now, now + ctx.manifest.heal_timeout_s)
        ctx.say(f"asked for a replacement of {node}: member job {n} (excluding {exclude})")
        ctx.event("replacement_requested", member=n, replaces=node, exclude=exclude)

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
            if error.exists():
                why = error.read_text(errors="replace").strip().splitlines() or ["no reason given"]
                self.ctx.fail(f"node {want.replaces} was lost and its replacement (member job {n}) failed: {why[-1]}")
            elif time.monotonic() > want.deadline:
                self.ctx.fail(
                    f"node {want.replaces} was lost and no replacement joined within "
                    f"{self.ctx.manifest.heal_timeout_s:g} s (--heal-timeout; member job {n}: "
                    f"{self.ctx.paths.member_log(n)})"
                )
