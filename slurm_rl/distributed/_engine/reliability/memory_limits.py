"""``memory_limit`` of a worker group: Ray's ``memory`` resource reserved on each node the group
uses (held by one zero-CPU actor per node for the group's life), and the memory watchdog on
each worker's node (``worker_env/node_probe.py``) that stops a worker past the limit."""

from __future__ import annotations

from typing import Any

from ...worker_env.node_probe import probe_on
from ..group_state import GroupState
from .health import locate, node_names

MEMORY_HOLD_TIMEOUT_S = 10.0


class _MemoryHold:
    """Holds a share of Ray's ``memory`` resource on one node for a group with memory_limit."""


class MemoryLimits:
    def __init__(self, state: GroupState) -> None:
        self.state = state
        self.holds: list[Any] = []

    def reserve(self, bundles: list[tuple[Any, int]]) -> None:
        """Take ``memory_limit`` x (workers on the node) of Ray's ``memory`` resource on each node
        of the group, held by one zero-CPU actor per node for the group's life: scheduling
        elsewhere sees it gone. Fails fast, naming the node, when the node has not that much."""
        import ray
        from ray.util.placement_group import placement_group_table
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        self.holds = []
        if not self.state.settings.memory_limit_bytes:
            return
        per_node: dict[str, int] = {}
        for pg, bundle in bundles:
            node = placement_group_table(pg)["bundles_to_node_id"][bundle]
            per_node[node] = per_node.get(node, 0) + 1
        names = node_names()
        totals = {n["NodeID"]: n["Resources"].get("memory", 0) for n in ray.nodes()}
        limit = self.state.settings.memory_limit_bytes
        for node, count in per_node.items():
            want = count * self.state.settings.memory_limit_bytes
            if want <= totals.get(node, 0):
                hold = (
                    ray.remote(_MemoryHold)
                    .options(
                        num_cpus=0,
                        memory=want,
                        scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=node, soft=False),
                    )
                    .remote()
                )
                self.holds.append(hold)
                try:
                    ray.get(hold.__ray_ready__.remote(), timeout=MEMORY_HOLD_TIMEOUT_S)  # type: ignore[union-attr]
                    continue
                except ray.exceptions.GetTimeoutError:
                    pass
            self.release()
            raise ValueError(
                f"memory_limit: {count} worker(s) x {limit / 2**30:.2f} GiB do not fit in the "
                f"memory Ray has free on node {names.get(node, node)} (its total for Ray: "
                f"{totals.get(node, 0) / 2**30:.2f} GiB); lower memory_limit or spread the workers"
            )

    def release(self) -> None:
        import ray

        for hold in self.holds:
            try:
                ray.kill(hold)
            except Exception:  # noqa: BLE001 - already gone
                pass
        self.holds = []

    def watch(self, workers: list[int]) -> None:
        import ray

        if not self.state.settings.memory_limit_bytes:
            return
        locate(self.state, workers)
        asks = []
        for w in workers:
            record = self.state.tracker.records[w]
            if record.pid and record.node_id:
                label = f"worker {w} ({self.state.metadata[w]['name']})"
                asks.append(
                    probe_on(record.node_id).watch.remote(record.pid, self.state.settings.memory_limit_bytes, label)
                )
        ray.get(asks)
