"""Rendezvous ports of a cluster's worker groups and the batched address/port lookup.

A probe is a zero-CPU Ray task on a bundle's node that answers (node IP, free port in the
cluster's range). It needs a fresh worker process (seconds on a busy node), so the master
port keeps one probe running ahead: a call takes its result and starts the next one."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .node_address import _get_free_port_local

Probe = Callable[[], Any]  # starts one probe: an ObjectRef of (address, port)


class MasterPorts:
    """Each ``next`` a (address, port) that no earlier call of this cluster returned (worker
    groups sharing a cluster never share a rendezvous)."""

    def __init__(self, low: int, high: int) -> None:
        self.low, self.high = low, high
        self.allocated: set[int] = set()
        self.ahead: Any = None  # the probe started for the next call

    def next(self, probe: Probe) -> tuple[str, int]:
        import ray

        for _ in range(10):
            ref = self.ahead if self.ahead is not None else probe()
            self.ahead = probe()
            address, port = ray.get(ref)
            if port not in self.allocated:
                self.allocated.add(port)
                return address, port
        raise RuntimeError(
            f"Failed to find a unique master port after 10 retries in [{self.low}, {self.high}). "
            f"Already allocated ports: {sorted(self.allocated)}"
        )

    def cancel(self) -> None:
        import ray

        if self.ahead is not None:
            ray.cancel(self.ahead)
        self.ahead = None


def gather_in_order(ray: Any, refs: list[Any], batch_size: int) -> list[Any]:
    """Every ref's value, in the refs' order, fetched ``batch_size`` at a time as they finish
    (all probes run at once; a slow node does not hold the others' answers back); ``ray`` is
    the module to ask (the facade's, which tests may replace)."""
    out: dict[Any, Any] = {}
    pending = list(refs)
    while pending:
        ready, pending = ray.wait(pending, num_returns=min(batch_size, len(pending)))
        out.update(zip(ready, ray.get(ready)))
    return [out[r] for r in refs]


def reserve_ports(count: int, low: int, high: int) -> list[int]:
    """``count`` distinct ports of [low, high), each free on this node when chosen (a band below
    the kernel's ephemeral range: no outgoing connection takes one before its server binds it);
    RuntimeError when the band has too few."""
    chosen: list[int] = []
    for _ in range(count):
        chosen.append(_get_free_port_local(low, high, max_retries=None, excluded_ports=set(chosen)))
    return chosen
