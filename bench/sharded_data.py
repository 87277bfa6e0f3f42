"""run_all_workers_sharded_data vs the same calls made with raw Ray handles and object refs,
measured in one run on an embedded local Ray (8 workers, data_parallel 4 x tensor_parallel 2).

    python bench/sharded_data.py [--mib 64] [--repeat 15]

Both sides shard the batch on data_parallel, put each shard and the common kwargs in the object
store once, and call every worker (tensor-parallel peers share their shard). Prints throughput
and the ratio (target >= 0.9x of raw). Not a CI gate.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import ray
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from slurm_rl.distributed import (
    BatchedDataDict,
    NamedSharding,
    RayVirtualCluster,
    RayWorkerGroup,
)

DP, TP = 4, 2


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mib", type=int, default=64)
    ap.add_argument("--repeat", type=int, default=15)
    args = ap.parse_args()
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    ray.init(
        num_cpus=DP * TP, include_dashboard=False, runtime_env={"env_vars": {"PYTHONPATH": str(Path(__file__).parent)}}
    )
    cluster = RayVirtualCluster([DP * TP], use_gpus=False, name="bench")
    layout = NamedSharding([[d * TP + t for t in range(TP)] for d in range(DP)], ["data_parallel", "tensor_parallel"])
    group = RayWorkerGroup(
        cluster,
        "bare_worker.Bare",
        sharding_annotations=layout,
        bundle_indices_list=[(0, [d * TP + t for t in range(TP)]) for d in range(DP)],
    )
    actors = group.workers  # the same actors, called directly: only the dispatch differs
    rows = args.mib * 2**20 // (4 * 4096)
    batch = BatchedDataDict({"x": torch.randn(rows, 4096)})
    common = {"cfg": torch.randn(2**20)}  # 4 MiB shared by every call
    nbytes = batch["x"].numel() * 4

    def ours() -> list[int]:
        fut = group.run_all_workers_sharded_data(
            "consume",
            data=batch,
            in_sharded_axes=["data_parallel"],
            replicate_on_axes=["tensor_parallel"],
            output_is_replicated=["tensor_parallel"],
            common_kwargs=common,
        )
        return group.get_all_worker_results(fut)

    def raw() -> list[int]:
        shard_refs = [ray.put(s) for s in batch.shard_by_batch_size(DP)]
        cfg = ray.put(common["cfg"])
        refs = [actors[d * TP + t].consume.remote(shard_refs[d], cfg=cfg) for d in range(DP) for t in range(TP)]
        return ray.get(refs)[::TP]

    assert ours() == raw() == [rows // DP] * DP
    t_ours, t_raw = [], []
    for i in range(args.repeat):  # interleaved, alternating which goes first
        for side in (ours, raw) if i % 2 == 0 else (raw, ours):
            t0 = time.perf_counter()
            side()
            (t_ours if side is ours else t_raw).append(time.perf_counter() - t0)
    o, r = statistics.median(t_ours), statistics.median(t_raw)
    print(f"{args.mib} MiB batch + 4 MiB common kwargs to {DP}x{TP} workers, median of {args.repeat}:")
    print(
        f"  run_all_workers_sharded_data {nbytes / o / 2**30:.2f} GiB/s ({o * 1e3:.1f} ms); "
        f"raw handles+refs {nbytes / r / 2**30:.2f} GiB/s ({r * 1e3:.1f} ms) -> {r / o:.2f}x of raw (target >= 0.9)"
    )
    group.shutdown()
    cluster.shutdown()
    ray.shutdown()


if __name__ == "__main__":
    main()
