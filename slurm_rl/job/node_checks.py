"""Preflight on the job's own nodes (--preflight, docs/causes.md): every node checks, beside Ray's
bring-up, what a run needs there: free space in its temp dir and under the fileroot, its fabric
interface up, the GPUs SLURM gave listed by nvidia-smi; then the job's Python imports slurm_rl
and torch and the nodes exchange data through gloo, timed (job/node_checks_torch.py). Each node
publishes its results in the job dir (the local ones first: a downed fabric cannot answer through
Ray); node 0 holds the driver until every result is in, and fails the attempt naming each bad node and
its check (core/node_verdict.py judges), which finalize runs again without them (--on-bad-node
exclude), or, under --heal, replaces the bad worker nodes with member jobs (preflight_replace.py)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

from ..core import causes as c
from ..core.causes import Cause
from ..core.events import write_atomic
from ..core.job_env import MEMBER_RANK_BASE
from ..core.node_verdict import MIN_FREE_BYTES, Check, NodeResult, Verdict, judge
from ..core.retries import add_bad_nodes
from .context import NodeContext
from .preflight_replace import leaving, publish_leaving, replace_bad, replaceable

if TYPE_CHECKING:
    from .member_watch import MemberWatch

COLLECTIVE_TIMEOUT_S = 30.0  # the rendezvous and the exchange, together
CHILD_TIMEOUT_S = 120.0  # the child (a torch import on a busy node, then the exchange)
OWN_RESULT_WAIT_S = 5.0  # for a node's own local checks; for the others' once one node is bad


def gib(n: float) -> str:
    return f"{n / (1 << 30):.1f} GiB"


def disk_check(places: list[Path]) -> Check:
    for place in places:
        where = next((p for p in (place, *place.parents) if p.exists()), Path("/"))
        free = shutil.disk_usage(where).free
        if free < MIN_FREE_BYTES:
            return Check("disk", False, f"{gib(free)} free in {where} (needs {gib(MIN_FREE_BYTES)})")
    return Check("disk", True, f"at least {gib(MIN_FREE_BYTES)} free in {', '.join(map(str, places))}")


def fabric_check(interface: str | None) -> Check:
    if not interface:
        return Check("fabric", True, "no network_interface in the spec: the node's name's address")
    import psutil  # its flags from this network namespace (a container's /sys may show another's)

    stats = psutil.net_if_stats().get(interface)
    if stats is None:
        return Check("fabric", False, f"{interface} does not exist here")
    return Check("fabric", stats.isup, f"{interface} is {'up' if stats.isup else 'down'}")


def gpu_check(gpus: int) -> Check | None:
    """The GPUs SLURM gave, as nvidia-smi lists them for this process (its CUDA_VISIBLE_DEVICES)."""
    if not gpus:
        return None
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return Check("gpus", False, f"SLURM gave {gpus} GPU(s) and there is no nvidia-smi")
    res = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=60, check=False)
    seen = [line for line in res.stdout.splitlines() if line.startswith("GPU ")]
    return Check("gpus", len(seen) == gpus, f"nvidia-smi lists {len(seen)} of the {gpus} GPU(s) SLURM gave")


class NodePreflight:
    """This node's preflight, in a thread: started with the role, published to the job dir."""

    def __init__(self, ctx: NodeContext) -> None:
        self.ctx = ctx
        self.marker = ctx.paths.node_marker(ctx.attempt, ctx.rank, "preflight")

    def start(self) -> NodePreflight:
        threading.Thread(target=self.run, name="preflight", daemon=True).start()
        return self

    def run(self) -> None:
        ctx, t0 = self.ctx, time.monotonic()
        local = [disk_check([Path(ctx.temp_dir), ctx.paths.job_dir]), fabric_check(ctx.address.interface)]
        local += [c for c in [gpu_check(ctx.gpus)] if c is not None]
        self.publish(NodeResult(ctx.node, ctx.rank, tuple(local)))
        checks = (*local, *self.child())
        result = NodeResult(ctx.node, ctx.rank, checks, True, round(time.monotonic() - t0, 2))
        # the event first: once the result is in, node 0's verdict (and what follows it) may come
        ctx.event("preflight", ok=all(c.ok for c in checks), seconds=result.seconds, checks=result.as_dict()["checks"])
        self.publish(result)

    def child(self) -> list[Check]:
        ctx = self.ctx
        store = ctx.paths.markers / f"{ctx.attempt}.preflight-store"
        argv = [sys.executable, "-m", "slurm_rl.job.node_checks_torch", str(ctx.rank), str(len(ctx.nodes))]
        argv += [str(store), str(ctx.gpus), str(COLLECTIVE_TIMEOUT_S), ctx.ip]
        try:
            res = subprocess.run(argv, capture_output=True, text=True, timeout=CHILD_TIMEOUT_S, check=False)
            return [Check(**c) for c in json.loads(res.stdout.strip().splitlines()[-1])]
        except (subprocess.TimeoutExpired, ValueError, IndexError, TypeError):
            if ctx.stop_requested.is_set():  # stopped with the job (another node's cause): no finding
                return [Check("python", True, "stopped with the job before it answered")]
            return [Check("python", False, f"{sys.executable} -m slurm_rl.job.node_checks_torch gave no answer")]

    def publish(self, result: NodeResult) -> None:
        write_atomic(self.marker, json.dumps(result.as_dict()) + "\n")


def read_results(ctx: NodeContext) -> list[NodeResult]:
    out = []
    for marker in ctx.paths.node_markers(ctx.attempt, "preflight"):
        try:
            out.append(NodeResult.from_dict(json.loads(marker.read_text())))
        except (OSError, ValueError, KeyError):
            continue  # being replaced: read again next time
    return out


def settled(ctx: NodeContext, deadline: float) -> Verdict:
    """Every node's verdict, or, once a node is bad, the bad nodes among every node's local
    checks (they come within a second of its start): all of them go in one retry, each retry
    costing SLURM's requeue delay (AuthInfo cred_expire, 120 s by default) and a queue wait.
    What is in at ``deadline`` otherwise."""
    bad_since: float | None = None
    while True:
        results = read_results(ctx)
        verdict = judge(results, len(ctx.nodes))
        now = time.monotonic()
        if verdict.bad and bad_since is None:
            bad_since = now
        all_local = len({r.rank for r in results}) >= len(ctx.nodes)
        if verdict.complete or now > deadline or ctx.stop_requested.is_set():
            return verdict
        if bad_since is not None and (all_local or now - bad_since > OWN_RESULT_WAIT_S):
            return verdict
        time.sleep(0.2)


def preflight_passed(ctx: NodeContext, members: MemberWatch | None = None) -> bool:
    """Every node's preflight is in and good, or (--heal) each bad worker node replaced by a
    member job; else the job fails naming the bad nodes' checks (finalize runs it again without
    them under --on-bad-node exclude)."""
    t0 = time.monotonic()
    verdict = settled(ctx, t0 + ctx.manifest.ready_timeout_s)
    waited = round(time.monotonic() - t0, 2)
    ctx.event("preflight_verdict", ok=verdict.ok, bad=[list(b) for b in verdict.bad], waited_s=waited)
    if verdict.ok or not verdict.bad:  # all good, or a node that never reported: the join watch's to judge
        publish_leaving(ctx, [])
        return True
    nodes = list(dict.fromkeys(node for node, _, _ in verdict.bad))
    if members is not None and replaceable(ctx, nodes, members):
        return replace_bad(ctx, members, verdict.bad)
    publish_leaving(ctx, [])  # none leaves: the job goes again (or fails)
    ctx.fail(*bad_node_ending(ctx, verdict.bad))
    return False


def bad_node_ending(ctx: NodeContext, bad: tuple[tuple[str, str, str], ...]) -> tuple[str, Cause]:
    """The attempt's end, naming each bad node and what its check found (the cause: the first);
    the nodes go into the job's bad_nodes, which no later attempt is given (finalize, under
    exclude)."""
    nodes = list(dict.fromkeys(node for node, _, _ in bad))
    if ctx.manifest.on_bad_node == "exclude":
        add_bad_nodes(ctx.paths, nodes)
        then = f"; the job goes again without {', '.join(nodes)} (--on-bad-node exclude)"
    else:
        then = f"; --on-bad-node exclude would run it again without {'that node' if len(nodes) == 1 else 'them'}"
    found = "; ".join(f"{node} failed the check {check}: {what}" for node, check, what in bad)
    node, check, _ = bad[0]
    return f"preflight: {found}{then}", Cause(c.PREFLIGHT, node, check=check)


def found_bad(ctx: NodeContext) -> tuple[str, Cause] | None:
    """What preflight has found so far, as the job's ending: a node that failed (its Ray could not
    start on a full disk, could not join over a downed fabric) failed because of what preflight
    names, which is the cause to record and the nodes to go again without."""
    if not ctx.manifest.preflight or ctx.rank >= MEMBER_RANK_BASE:
        return None
    own = ctx.paths.node_marker(ctx.attempt, ctx.rank, "preflight")
    deadline = time.monotonic() + OWN_RESULT_WAIT_S  # this node's local checks come within a second
    while not own.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    replaced = set(leaving(ctx) or ())  # (--heal) gone from the job: a later failure is not theirs
    bad = tuple(b for b in settled(ctx, deadline).bad if b[0] not in replaced)
    return bad_node_ending(ctx, bad) if bad else None
