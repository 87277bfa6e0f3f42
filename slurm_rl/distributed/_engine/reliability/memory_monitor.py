"""``RayVirtualCluster(monitor_memory=True)``: a driver thread that reads each of the cluster's
nodes' free memory (through the node probes) every ``SLURM_RL_MEMORY_MONITOR_S`` seconds
(default 10) and warns, once per node until it recovers, when less than
``SLURM_RL_MEMORY_WARN_FRACTION`` (default 0.1) of it is available."""

from __future__ import annotations

import logging
import os
import threading
from typing import Any

from ...worker_env.node_probe import probe_on

logger = logging.getLogger(__name__)

INTERVAL_ENV, FRACTION_ENV = "SLURM_RL_MEMORY_MONITOR_S", "SLURM_RL_MEMORY_WARN_FRACTION"


def _env_float(name: str, default: float) -> float:
    raw = os.environ.get(name)
    try:
        return float(raw) if raw else default
    except ValueError:
        raise ValueError(f"{name}={raw!r}: must be a number") from None


class MemoryMonitor:
    def __init__(self, node_ids: list[str]) -> None:
        self.node_ids = node_ids
        self.interval_s = _env_float(INTERVAL_ENV, 10.0)
        self.warn_fraction = _env_float(FRACTION_ENV, 0.1)
        self.samples: dict[str, dict[str, Any]] = {}
        self.warnings: list[str] = []
        self._low: set[str] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="slurm-rl-memory-monitor", daemon=True)
        self._thread.start()

    def sample(self) -> dict[str, dict[str, Any]]:
        import ray

        refs = {n: probe_on(n).node_memory.remote() for n in self.node_ids}
        for node_id, ref in refs.items():
            try:
                s = ray.get(ref, timeout=30)
            except Exception:  # noqa: BLE001 - a node that does not answer has no sample
                continue
            self.samples[node_id] = s
            fraction = s["available_bytes"] / s["total_bytes"]
            if fraction < self.warn_fraction and node_id not in self._low:
                self._low.add(node_id)
                text = (
                    f"node {s['node']} is low on memory: {s['available_bytes'] / 2**30:.1f} GiB of "
                    f"{s['total_bytes'] / 2**30:.1f} GiB available ({fraction:.0%} < {self.warn_fraction:.0%})"
                )
                self.warnings.append(text)
                logger.warning("%s", text)
            elif fraction >= self.warn_fraction:
                self._low.discard(node_id)
        return self.samples

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.sample()
            except Exception as exc:  # noqa: BLE001 - Ray shut down under us: stop quietly
                logger.debug("memory monitor stopped: %s", exc)
                return
            self._stop.wait(self.interval_s)

    def stop(self) -> None:
        self._stop.set()
