"""slurm-rl's GPU path on real NVIDIA GPUs (a machine with CUDA, no SLURM needed), measured
against raw torch in the same run:

    python bench/real_gpu.py

1. ``init_ray()`` starts a local Ray that counts the machine's GPUs;
2. a ``RayVirtualCluster`` of one GPU bundle per GPU (``communication_backend="nccl"``) and a
   ``RayWorkerGroup`` on it: each worker sees exactly one device (its ``CUDA_VISIBLE_DEVICES``),
   a distinct one, and NCCL all-reduces a CUDA tensor across the group;
3. two colocated groups (``enable_colocation=True``) share the GPUs, half a GPU each;
4. a bf16 matmul in a worker vs the same matmul in this process (ratio: worker / raw).
Prints one JSON report. Not a CI gate (CI has no GPU)."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch

from slurm_rl.distributed import RayVirtualCluster, RayWorkerGroup, init_ray

N = 8192


def matmul_tflops() -> float:
    a = torch.randn(N, N, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(N, N, device="cuda", dtype=torch.bfloat16)
    for _ in range(3):
        a @ b
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(10):
        a @ b
    torch.cuda.synchronize()
    return 10 * 2 * N**3 / (time.perf_counter() - t0) / 1e12


class GpuWorker:
    def where(self) -> dict:
        return {
            "rank": int(os.environ["RANK"]),
            "CUDA_VISIBLE_DEVICES": os.environ.get("CUDA_VISIBLE_DEVICES"),
            "devices_seen": torch.cuda.device_count(),
            "name": torch.cuda.get_device_name(0),
        }

    def all_reduce(self) -> tuple[float, str]:
        import torch.distributed as dist

        from slurm_rl.distributed.collective import init_process_group

        init_process_group()
        t = torch.full((1 << 20,), float(int(os.environ["RANK"]) + 1), device="cuda")
        dist.all_reduce(t)
        torch.cuda.synchronize()
        backend = dist.get_backend()
        dist.destroy_process_group()
        return float(t[0]), str(backend)

    def matmul_tflops(self) -> float:
        return matmul_tflops()


def main() -> None:
    gpus = torch.cuda.device_count()
    assert gpus >= 1, "no CUDA device here"
    init_ray()
    import ray

    report: dict = {"gpus": gpus, "ray_gpus": ray.cluster_resources().get("GPU", 0)}
    cluster = RayVirtualCluster([gpus], use_gpus=True, num_gpus_per_node=gpus, communication_backend="nccl")
    group = RayWorkerGroup(cluster, GpuWorker, name_prefix="gpu")
    report["workers"] = ray.get([group.run_single_worker_single_data("where", w) for w in range(gpus)])
    report["all_reduce"] = ray.get(group.run_all_workers_single_data("all_reduce"))
    report["expected_sum"] = gpus * (gpus + 1) / 2
    worker_tflops = ray.get(group.run_single_worker_single_data("matmul_tflops", 0))
    group.shutdown()
    cluster.shutdown()
    shared = RayVirtualCluster([gpus], use_gpus=True, num_gpus_per_node=gpus, enable_colocation=True)
    a = RayWorkerGroup(shared, GpuWorker, name_prefix="policy")
    b = RayWorkerGroup(shared, GpuWorker, name_prefix="generation")
    report["colocated"] = {
        "policy": ray.get([a.run_single_worker_single_data("where", w) for w in range(gpus)]),
        "generation": ray.get([b.run_single_worker_single_data("where", w) for w in range(gpus)]),
    }
    for done in (a, b, shared):
        done.shutdown()
    raw = matmul_tflops()
    report["matmul_tflops"] = {
        "raw": round(raw, 1),
        "worker": round(worker_tflops, 1),
        "ratio": round(worker_tflops / raw, 3),
    }
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
