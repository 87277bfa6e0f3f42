"""``memory_limit`` of a worker group: Ray's ``memory`` resource reserved on each node the group
uses (held by a one-bundle placement group per node for the group's life: no process, so
holding it does not wait on a worker starting on a busy node), and the memory watchdog on
each worker's node (``worker_env/node_probe.py``) that stops a worker past the limit."""

from __future__ import annotations

from typing import Any

from ...worker_env.node_probe import probe_on
from ..group_state import GroupState
from .health import locate, node_names

MEMORY_HOLD_TIMEOUT_S = 30.0
NODE_ID_LABEL = "ray.io/node-id"


class MemoryLimits:
    def __init__(self, state: GroupState) -> None:
        self.state = state
        self.holds: list[Any] = []

    def reserve(self, bundles: list[tuple[Any, int]]) -> None:
        """Take ``memory_limit`` x (workers on the node) of Ray's ``memory`` resource on each node
        of the group, held by a placement group pinned to the node for the group's life:
        scheduling elsewhere sees it gone. Fails, naming the node, when the node has not that much
        (at once past its total; within MEMORY_HOLD_TIMEOUT_S when others hold the rest)."""
        import ray
        from ray.util.placement_group import placement_group, placement_group_table

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
                hold = placement_group(
                    [{"memory": want}], strategy="STRICT_PACK", bundle_label_selector=[{NODE_ID_LABEL: node}]
                )
                self.holds.append(hold)
                if hold.wait(MEMORY_HOLD_TIMEOUT_S):
                    continue
            self.release()
            raise ValueError(
                f"memory_limit: {count} worker(s) x {limit / 2**30:.2f} GiB do not fit in the "
                f"memory Ray has free on node {names.get(node, node)} (its total for Ray: "
                f"{totals.get(node, 0) / 2**30:.2f} GiB); lower memory_limit or spread the workers"
            )

    def release(self) -> None:
        from ray.util.placement_group import remove_placement_group

        for hold in self.holds:
            try:
                remove_placement_group(hold)
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
