"""Worker-group overhead vs raw Ray, measured in one run on an embedded local Ray.

    python bench/worker_group.py

1. create a RayWorkerGroup of 8 workers vs 8 bare actors in the same placement group;
2. a no-op run_all_workers_single_data round trip vs raw ray.get([a.f.remote() ...]);
3. shard a 256 MB BatchedDataDict and dispatch it to 8 workers vs one raw ray.put of 256 MB.
Prints the ratios (targets: <= 1.15, <= 1.1, bandwidth >= 0.5 of raw). Not a CI gate.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

import psutil
import ray
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from slurm_rl.distributed import BatchedDataDict, RayVirtualCluster, RayWorkerBuilder, RayWorkerGroup

N = 8


from bare_worker import Bare


def timed(fn):  # type: ignore[no-untyped-def]
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def main() -> None:
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    ray.init(num_cpus=N, include_dashboard=False, runtime_env={"env_vars": {"PYTHONPATH": str(Path(__file__).parent)}})
    cluster = RayVirtualCluster([N], use_gpus=False, name="bench")
    pg = cluster.get_placement_groups()[0]
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy as PGS

    def bare_actors(num_cpus: int) -> list:  # type: ignore[type-arg]
        made = [
            ray.remote(Bare)
            .options(num_cpus=num_cpus, scheduling_strategy=PGS(placement_group=pg, placement_group_bundle_index=i))
            .remote()
            for i in range(N)
        ]
        ray.get([a.__ray_ready__.remote() for a in made])
        return made

    def settle() -> None:
        """Wait until killed actors' processes are gone, so each side starts from the same state."""
        end = time.monotonic() + 60
        while time.monotonic() < end and any(
            p.info["name"].startswith("ray::Bare") for p in psutil.process_iter(["name"])
        ):
            time.sleep(0.1)

    cluster.get_master_address_and_port()  # warm: both sides then find an idle worker process
    create_raw, create_grp = [], []
    for i in range(4):  # alternate which side goes first
        for side in (0, 1) if i % 2 == 0 else (1, 0):
            settle()
            if side == 0:
                t, actors = timed(lambda: bare_actors(1))
                create_raw.append(t)
                for a in actors:
                    ray.kill(a)
            else:
                t, group = timed(lambda: RayWorkerGroup(cluster, RayWorkerBuilder("bare_worker.Bare"), name_prefix="b"))
                create_grp.append(t)
                group.shutdown()
    settle()
    group = RayWorkerGroup(cluster, RayWorkerBuilder("bare_worker.Bare"), name_prefix="b")
    actors = bare_actors(0)  # same bundles, no CPU: both sets live side by side for the round trips

    def rt_raw() -> None:
        ray.get([a.noop.remote() for a in actors])

    def rt_grp() -> None:
        ray.get(group.run_all_workers_single_data("noop"))

    for f in (rt_raw, rt_grp):
        for _ in range(20):
            f()
    raw_rt, grp_rt = [], []
    for _ in range(300):  # interleaved so both see the same machine state
        raw_rt.append(timed(rt_raw)[0])
        grp_rt.append(timed(rt_grp)[0])

    big = BatchedDataDict({"x": torch.randn(N * 1024, 8192)})  # 256 MiB of float32
    nbytes = big["x"].numel() * 4
    put_raw, dispatch = [], []
    for _ in range(3):
        t, ref = timed(lambda: ray.put(big["x"]))
        put_raw.append(t)
        del ref

        def go() -> list[int]:
            shards = big.shard_by_batch_size(N)
            return group.get_all_worker_results(group.run_all_workers_multiple_data("size_of", shards))

        t, sizes = timed(go)
        assert sizes == [1024] * N
        dispatch.append(t)

    c_raw, c_grp = statistics.median(create_raw), statistics.median(create_grp)
    r_raw, r_grp = statistics.median(raw_rt) * 1e3, statistics.median(grp_rt) * 1e3
    p_raw, p_grp = statistics.median(put_raw), statistics.median(dispatch)
    print(
        f"create {N} workers: group {c_grp:.2f}s vs bare actors {c_raw:.2f}s -> {c_grp / c_raw:.2f}x (target <= 1.15)"
    )
    print(f"no-op round trip: group {r_grp:.3f}ms vs raw {r_raw:.3f}ms -> {r_grp / r_raw:.2f}x (target <= 1.1)")
    print(
        f"256 MiB to {N} workers: shard+dispatch {nbytes / p_grp / 2**30:.2f} GiB/s vs raw ray.put "
        f"{nbytes / p_raw / 2**30:.2f} GiB/s -> {p_raw / p_grp:.2f}x of raw bandwidth (target >= 0.5)"
    )
    group.shutdown()
    cluster.shutdown()
    ray.shutdown()


if __name__ == "__main__":
    main()
