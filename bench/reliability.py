"""Worker-group reliability costs and load balancing, one run on an embedded local Ray.

    python bench/reliability.py

1. Load balancing: 64 items on 4 workers, sleep-bound costs (1 unit = 10 ms, seeded).
   a) every 4th item costs 10 units, the others 1: exactly the pattern a static split puts on
      one worker; least_loaded vs round_robin (target: >= 2x faster);
   b) random costs 1..10: the same ratio, for the record.
2. Health overhead: a no-op run_all_workers_single_data round trip through get_results on a
   group with restart_on_failure (call tracking, failure-aware gather) vs raw Ray actors doing
   ray.get([a.noop.remote() ...]) in the same placement group; median of 600 interleaved round
   trips (target: <= 1.10). Not a CI gate.
"""

from __future__ import annotations

import os
import random
import statistics
import sys
import time
from pathlib import Path

import ray

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from slurm_rl.distributed import RayVirtualCluster, RayWorkerGroup

PROBE = "tests.unit.workers.reliable.ProbeWorker"
UNIT_S = 0.01
N = 4


def balanced(cluster: RayVirtualCluster, strategy: str, items: list[tuple[int, int]]) -> float:
    group = RayWorkerGroup(cluster, PROBE, name_prefix=strategy, load_balancing_strategy=strategy)
    group.run_balanced("cost", items[:N], common_kwargs={"unit_s": 0.0})  # warm: every worker answered once
    t0 = time.perf_counter()
    out = group.run_balanced("cost", items, common_kwargs={"unit_s": UNIT_S})
    took = time.perf_counter() - t0
    assert out == [i for i, _ in items]
    group.shutdown(force=True)
    return took


def main() -> None:
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    ray.init(num_cpus=N + 1, include_dashboard=False, runtime_env={"env_vars": {"PYTHONPATH": str(ROOT)}})
    cluster = RayVirtualCluster([N], use_gpus=False, name="bench")
    rng = random.Random(0)
    patterns = {
        "every 4th item costs 10": [(i, 10 if i % 4 == 0 else 1) for i in range(64)],
        "random costs 1..10": [(i, rng.randint(1, 10)) for i in range(64)],
    }
    for name, items in patterns.items():
        ideal = sum(c for _, c in items) * UNIT_S / N
        rr, ll = balanced(cluster, "round_robin", items), balanced(cluster, "least_loaded", items)
        print(
            f"{name:>24}: round_robin {rr:.2f} s, least_loaded {ll:.2f} s (ideal {ideal:.2f} s): "
            f"least_loaded is {rr / ll:.2f}x faster"
        )

    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy as PGS

    from tests.unit.workers.reliable import ProbeWorker

    group = RayWorkerGroup(cluster, PROBE, restart_on_failure=True, name_prefix="health")
    pg = cluster.get_placement_groups()[0]
    raw = [
        ray.remote(ProbeWorker)
        .options(
            num_cpus=0,
            runtime_env={"env_vars": {"RANK": str(i), "MASTER_PORT": "0"}},
            scheduling_strategy=PGS(placement_group=pg, placement_group_bundle_index=i),
        )
        .remote()
        for i in range(N)
    ]
    ray.get([a.__ray_ready__.remote() for a in raw])
    t_raw, t_group = [], []
    for _ in range(50):  # warm both paths
        ray.get([a.noop.remote() for a in raw])
        group.get_results(group.run_all_workers_single_data("noop"))
    for _ in range(600):
        t0 = time.perf_counter()
        ray.get([a.noop.remote() for a in raw])
        t_raw.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        group.get_results(group.run_all_workers_single_data("noop"))
        t_group.append(time.perf_counter() - t0)
    raw_ms, group_ms = statistics.median(t_raw) * 1e3, statistics.median(t_group) * 1e3
    print(
        f"no-op round trip on {N} workers: raw Ray {raw_ms:.3f} ms, group with health machinery {group_ms:.3f} ms: "
        f"ratio {group_ms / raw_ms:.3f} (target <= 1.10)"
    )
    group.shutdown(force=True)
    cluster.shutdown()
    ray.shutdown()


if __name__ == "__main__":
    main()
