"""Per-worker status, resource usage and stuck-call detection of a worker group. Asks Ray's
GCS and each node's probe, never the worker itself: a busy or stuck worker still shows up."""

from __future__ import annotations

from typing import Any

from ...worker_env.node_probe import probe_on
from ..group_state import GroupState
from .health import locate, node_label, node_names

DEFAULT_STUCK_TIMEOUT_S = 300.0


class Status:
    def __init__(self, state: GroupState) -> None:
        self.state = state

    def get_worker_status(self) -> list[dict[str, Any]]:
        """Per worker: state (alive, dead, restarting, pending), node, pid, the GPUs Ray gave it
        (``ray.get_gpu_ids()``, asked once when it came up), restarts, the current call and how
        long it has run. Asks Ray's GCS, never the worker: a stuck worker answers."""
        self.state.tracker.prune()
        infos = locate(self.state, list(range(len(self.state.workers))))
        names = node_names()
        out = []
        for w, info in infos.items():
            record = self.state.tracker.records[w]
            state = (
                "restarting"
                if record.restarting
                else "alive"
                if info.state == "ALIVE"
                else "dead"
                if info.state == "DEAD"
                else "pending"
            )
            current = self.state.tracker.current(w) if state == "alive" else None
            out.append(
                {
                    "worker": w,
                    "name": self.state.metadata[w]["name"],
                    "state": state,
                    "node": node_label(self.state, w, names),
                    "pid": record.pid,
                    "gpu_ids": self.state.gpu_ids[w],  # one per worker since the build
                    "restarts": record.restarts,
                    "current_call": current[0] if current else None,
                    "running_s": round(current[1], 2) if current else None,
                }
            )
        return out

    def get_resource_usage(self) -> list[dict[str, Any]]:
        """Per worker: CPU %, resident memory and GPU memory (NVML, where a GPU and nvidia-ml-py
        are present), read on the worker's node."""
        import ray

        locate(self.state, list(range(len(self.state.workers))))
        names = node_names()
        by_node: dict[str, list[int]] = {}
        for w, record in enumerate(self.state.tracker.records):
            if record.pid and record.node_id:
                by_node.setdefault(record.node_id, []).append(w)
        readings: dict[int, dict[str, Any]] = {}
        asks = {
            node: probe_on(node).usage.remote([self.state.tracker.records[w].pid for w in ws])
            for node, ws in by_node.items()
        }
        for node, ref in asks.items():
            try:
                per_pid = ray.get(ref, timeout=30)
            except Exception:  # noqa: BLE001 - a lost node has no readings
                per_pid = {}
            for w in by_node[node]:
                readings[w] = per_pid.get(self.state.tracker.records[w].pid, {})
        return [
            {
                "worker": w,
                "node": node_label(self.state, w, names),
                "pid": self.state.tracker.records[w].pid,
                "cpu_percent": readings.get(w, {}).get("cpu_percent"),
                "rss_bytes": readings.get(w, {}).get("rss_bytes"),
                "gpu_memory_bytes": readings.get(w, {}).get("gpu_memory_bytes"),
            }
            for w in range(len(self.state.workers))
        ]

    def detect_stuck_workers(self, timeout_s: float = DEFAULT_STUCK_TIMEOUT_S) -> list[dict[str, Any]]:
        """Workers whose current call has run longer than ``timeout_s``, each with the Python
        stack of every thread of its process (py-spy dump, run on its node). A call that ended
        while its stack was being taken is not reported: that stack would show the worker idle
        (a busy CI run saw an 8-s call end in the seconds the node's probe took to start)."""
        import ray

        records = self.state.tracker.records
        stuck = [
            s
            for s in self.get_worker_status()
            if s["state"] == "alive" and s["running_s"] is not None and s["running_s"] > timeout_s
        ]
        calls = {s["worker"]: records[s["worker"]].calls[0] for s in stuck}
        stacks = {s["worker"]: probe_on(records[s["worker"]].node_id).stack.remote(s["pid"]) for s in stuck}
        for s in stuck:
            try:
                s["stack"] = ray.get(stacks[s["worker"]], timeout=60)
            except Exception as exc:  # noqa: BLE001
                s["stack"] = f"stack unavailable: {exc}"
        self.state.tracker.prune()
        return [s for s in stuck if records[s["worker"]].calls and records[s["worker"]].calls[0] is calls[s["worker"]]]

    def print_worker_status(self) -> None:
        from .tables import print_table

        print_table("worker status", self.get_worker_status())

    def print_resource_usage(self) -> None:
        from .tables import print_table

        print_table("resource usage", self.get_resource_usage())
