"""What the driver knows about each worker of a group: its actor's state, node and pid (from
Ray's GCS actor table: no call to the worker, so a busy or stuck worker still answers), the
calls the group dispatched to it and not yet seen finish, and how often it was restarted.

Nothing here runs on the hot path but ``CallTracker.started``: one append per dispatched call."""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

TRACKED_CALLS_PER_WORKER = 64  # finished calls are pruned when a worker's queue grows past this


@dataclass
class ActorInfo:
    state: str  # ALIVE, DEAD, PENDING_CREATION, RESTARTING, DEPENDENCIES_UNREADY
    pid: int | None
    node_ip: str | None
    node_id: str | None
    death: str | None  # Ray's own words, first line, when DEAD


def actor_info(actor: Any) -> ActorInfo:
    """One GCS lookup (about a millisecond); ``actor`` is a Ray actor handle."""
    import ray._private.state as gcs

    info = gcs.actors(actor._actor_id.hex()) or {}
    address = info.get("Address") or {}
    death = info.get("DeathCause")
    message = None
    if death is not None and info.get("State") == "DEAD":  # a protobuf ActorDeathCause: one of several contexts
        context = getattr(death, death.WhichOneof("context") or "", None)
        lines = (getattr(context, "error_message", "") or str(death)).strip().splitlines()
        message = lines[0].split(" Some common causes")[0] if lines else None  # Ray's advice follows
    return ActorInfo(
        state=info.get("State", "UNKNOWN"),
        pid=info.get("Pid") or None,
        node_ip=address.get("IPAddress") or None,
        node_id=address.get("NodeID") or None,
        death=message,
    )


@dataclass
class Call:
    ref: Any
    method: str
    dispatched: float


@dataclass
class WorkerRecord:
    restarts: int = 0
    restarting: bool = False
    node_ip: str | None = None
    node_id: str | None = None
    pid: int | None = None
    calls: deque = field(default_factory=deque)  # Call, oldest first
    finished_at: float | None = None  # when the last call seen finished was seen finished


class CallTracker:
    """Per worker, the calls dispatched and not yet seen finish. A call's running time counts
    from its dispatch, or from when the call before it finished (a worker runs its calls one at
    a time), whichever is later. A finish is known to have happened after the call's dispatch and
    after the previous look that saw it still running: the later of the two is used (so a
    running time errs long by at most the time between two looks)."""

    def __init__(self, n: int) -> None:
        self.records = [WorkerRecord() for _ in range(n)]
        self.last_look = 0.0

    def started(self, worker: int, method: str, ref: Any) -> None:
        calls = self.records[worker].calls
        calls.append(Call(ref, method, time.monotonic()))
        if len(calls) > TRACKED_CALLS_PER_WORKER:
            self.prune([worker])

    def prune(self, workers: list[int] | None = None) -> None:
        import ray

        workers = list(range(len(self.records))) if workers is None else workers
        refs = [c.ref for w in workers for c in self.records[w].calls]
        if not refs:
            return
        ready, _ = ray.wait(refs, num_returns=len(refs), timeout=0, fetch_local=False)
        done = set(ready)
        previous_look, self.last_look = self.last_look, time.monotonic()
        for w in workers:
            record = self.records[w]
            while record.calls and record.calls[0].ref in done:
                finished = record.calls.popleft()
                record.finished_at = max(finished.dispatched, previous_look)
            # a later call can finish only after the earlier ones (one call at a time)
            record.calls = deque(c for c in record.calls if c.ref not in done)

    def current(self, worker: int) -> tuple[str, float] | None:
        """(method, seconds it has run) of the worker's current call, or None when idle."""
        record = self.records[worker]
        if not record.calls:
            return None
        call = record.calls[0]
        began = max(call.dispatched, record.finished_at or 0.0)
        return call.method, time.monotonic() - began

    def reset(self, worker: int) -> None:
        self.records[worker].calls.clear()
        self.records[worker].finished_at = None


def parse_memory(value: Any) -> int:
    """Bytes from ``8GB``, ``512MiB``, ``1.5G``, ``300MB`` or an int (bytes): pydantic's ByteSize,
    refusing zero and booleans with the option's name."""
    from pydantic import ByteSize, TypeAdapter, ValidationError

    try:
        size = int(TypeAdapter(ByteSize).validate_python(value)) if not isinstance(value, bool) else 0
    except ValidationError:
        size = 0
    if size <= 0:
        raise ValueError(f"memory_limit={value!r}: give a size like '8GB', '512MiB' or a number of bytes")
    return size


def node_names() -> dict[str, str]:
    """Ray node id -> host name (from Ray's node table: no DNS lookups)."""
    import ray

    return {n["NodeID"]: n.get("NodeManagerHostname") or n["NodeManagerAddress"] for n in ray.nodes()}


def locate(state: Any, workers: list[int]) -> dict[int, ActorInfo]:
    """Fresh GCS facts for these workers of a group; pid and node are remembered in the
    tracker's records (a dead actor's stay)."""

    infos = {}
    for w in workers:
        info = actor_info(state.workers[w])
        record = state.tracker.records[w]
        record.pid = info.pid or record.pid
        record.node_ip = info.node_ip or record.node_ip
        record.node_id = info.node_id or record.node_id
        infos[w] = info
    return infos


def node_label(state: Any, w: int, names: dict[str, str]) -> str:
    record = state.tracker.records[w]
    host = names.get(record.node_id or "", "")
    return f"{host} ({record.node_ip})" if host and host != record.node_ip else str(record.node_ip or "unknown")
