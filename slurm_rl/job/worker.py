"""Role of every node but node 0: join the head as soon as its GCS answers, then stay until
node 0 says stop (the driver ended), SLURM signals us, or the head goes away.

Once joined, a node asks the head's GCS (board.py), not the shared filesystem, whether to stop;
the stop flag in the job dir is read only when the GCS stops answering (node 0 ended)."""

from __future__ import annotations

import socket
import time
from dataclasses import dataclass

from ..core.events import read_json
from ..core.paths import JobPaths
from .board import Board, BoardUnreachable
from .context import NodeContext

HEAD_LOST_AFTER_S = 2.0
STAY_POLL_S = 0.25  # a GCS read each: a stop reaches this node within this (+ ~1 ms)
PRE_JOIN_FILE_POLL_S = 0.5  # before the GCS answers, the stop flag is the only way to hear of a stop


@dataclass
class StayDecision:
    """Whether a joined worker node should stop, and why. Pure, so the rule is unit-tested."""

    lost_since: float | None = None

    def check(self, stop_flag: bool, head_reachable: bool, now: float, head: str) -> str | None:
        if stop_flag:
            return "driver ended"
        if head_reachable:
            self.lost_since = None
        elif self.lost_since is None:
            self.lost_since = now
        elif now - self.lost_since > HEAD_LOST_AFTER_S:
            return f"Ray head on {head} unreachable"
        return None


def head_is_up(address: str, attempt: int) -> bool:
    """Whether the head's `ray start` has returned (its ``head`` key on the board): a node joins
    only then, because a head whose raylet gave up on its agents starts Ray once more, and that
    second start replaces the GCS that a node joined earlier would be left holding."""
    try:
        return Board(address, attempt).get("head") is not None
    except BoardUnreachable:  # GCS not answering yet (grpc, timeout or connection errors)
        return False


def published_address(paths: JobPaths, attempt: int) -> str | None:
    """The head's GCS address for this attempt, once it has written cluster.json."""
    cluster = read_json(paths.cluster) or {}
    return cluster.get("address") if cluster.get("attempt") == attempt else None


def run_worker(ctx: NodeContext) -> int:
    head = ctx.nodes[0]
    ports = ctx.ports  # this node's own ports, chosen now (free right now)
    import ray.scripts.scripts  # noqa: F401 - imported while the head starts: overlaps the wait

    # The head picks its GCS port at start and publishes it; join once its Ray is up (head_is_up).
    found: dict[str, str] = {}

    # a driver that ends before this node joined: the lifecycle loop (node.py) reads the stop flag
    # until the board exists, sets stop_requested, and wait_until raises Stopped
    def head_ready() -> bool:
        address = found.get("address") or published_address(ctx.paths, ctx.attempt)
        if not address:
            return False
        found["address"] = address
        host, _, port = address.rpartition(":")
        return port_open(host, int(port)) and head_is_up(address, ctx.attempt)

    ctx.wait_until(
        head_ready, ctx.manifest.ready_timeout_s, f"the Ray head on {head} (cluster.json in {ctx.paths.job_dir})"
    )
    address = found["address"]
    head_ip, _, gcs_text = address.rpartition(":")
    gcs = int(gcs_text)
    ctx.say(f"joining {address} with ports {ports.as_dict()}")
    ctx.ray_start([f"--address={address}"], retry=True)  # nothing joins a worker
    ctx.board = board = Board(address, ctx.attempt)
    ctx.event("node_up", **ctx.ray_node_cost())
    if not board.put("up", ctx.node, rank=ctx.rank):
        ctx.say(f"the head's GCS at {address} did not take this node's join; the head will time out waiting")
    decision = StayDecision()
    while not ctx.stop_requested.is_set():
        stop, reachable = stop_signal(ctx, board, head_ip, gcs)
        reason = decision.check(stop is not None, reachable, time.monotonic(), head)
        if reason:
            ctx.stop_reason = reason
            ctx.event("node_stop_seen", reason=reason, **({"job_exit": stop} if stop else {}))
            if stop is None and ctx.manifest.heal:
                end_orphaned_job(ctx)
            break
        time.sleep(STAY_POLL_S)
    return 0


def stop_signal(ctx: NodeContext, board: Board, head_ip: str, gcs: int) -> tuple[str | None, bool]:
    """(node 0's stop reason or None, whether the head's GCS answered). The stop flag file is
    read only when the GCS does not answer: node 0 writes it before its Ray goes away."""
    if port_open(head_ip, gcs):
        try:
            return board.get("stop"), True
        except BoardUnreachable:
            pass
    return ("" if ctx.stop_flag.exists() else None), False


def end_orphaned_job(ctx: NodeContext) -> None:
    """The head died without a word in a job that heals: SLURM takes the lost batch host out of a
    --no-kill job and keeps the job running on the others (seen on 26.05), so a surviving node
    cancels it where it has a SLURM client (a bare node; in a container without one, the job
    ends at its time limit, which the event says)."""
    from ..core.causes import NODE_LOST, Cause
    from ..core.exits import record_exit
    from ..slurm.from_node import cancel_job

    if not ctx.paths.exit_code.exists():  # the first node to see it says why (the head cannot)
        record_exit(
            ctx.paths, 1, f"the head node {ctx.nodes[0]} was lost (the Ray head and the driver ran there; --heal "
            "replaces worker nodes only; --requeue restarts a job)", Cause(NODE_LOST, ctx.nodes[0])
        )  # fmt: skip
    ctx.stop_flag.touch()  # the others stop as after a driver's end, not as cancelled
    cancelled, why = cancel_job(ctx.job_id)
    ctx.event("orphaned_job", cancelled=cancelled, why=why)


def port_open(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.2):
            return True
    except OSError:
        return False
