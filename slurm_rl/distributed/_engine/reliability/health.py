"""What the driver knows about each worker of a group: its actor's state, node and pid (from
Ray's GCS actor table: no call to the worker, so a busy or stuck worker still answers), the
calls the group dispatched to it and not yet seen finish, and how often it was restarted.

The call tracker itself is at the engine's floor (calls.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..calls import CallTracker, WorkerRecord  # noqa: F401 - importable here as before


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
