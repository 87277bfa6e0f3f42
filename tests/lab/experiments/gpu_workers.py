"""GPU workers through NeMo RL's API on GPUs SLURM handed out: RayVirtualCluster([n, n, ...],
use_gpus=True) over the GPU nodes, a worker group of one GPU per worker, then a tied group of
node 0's GPUs and a bundle's free address and port. Prints one JSON line: each worker's host,
CUDA_VISIBLE_DEVICES, ray.get_gpu_ids() and ranks; what get_worker_status() says of their GPUs;
each Ray node's GPU count; SLURM's view of the job (``scontrol show job -d``), and, per device
file of the lab, what opening it gave the driver (ENXIO: allowed, no driver; EPERM: the job's
device cgroup denies it).

argv: GPUS_PER_NODE [hold]  (hold: then wait for <job dir>/release, bounded)
"""

import errno
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import ray

from slurm_rl.distributed import RayVirtualCluster, RayWorkerGroup, init_ray

LAB_DEVICES = Path("/var/lib/slurm-lab/dev")


class GpuReport:
    def report(self) -> dict:
        return {
            "host": socket.gethostname(),
            "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES", ""),
            "gpu_ids": [str(g) for g in ray.get_gpu_ids()],
            "rank": os.environ.get("RANK"),
            "local_rank": os.environ.get("LOCAL_RANK"),
            "world_size": os.environ.get("WORLD_SIZE"),
        }


def opens() -> dict[str, str]:
    out = {}
    for dev in sorted(LAB_DEVICES.glob("nvidia*")):
        try:
            os.close(os.open(dev, os.O_RDWR))
            out[dev.name] = "opened"
        except OSError as exc:
            out[dev.name] = errno.errorcode.get(exc.errno or 0, str(exc.errno))
    return out


def main() -> int:
    per_node = int(sys.argv[1])
    init_ray()
    # GPU nodes only: a CPU-only head (--head-node cpu, or a hetjob's head component) has none
    nodes = [n for n in ray.nodes() if n["Alive"] and n["Resources"].get("GPU")]
    cluster = RayVirtualCluster([per_node] * len(nodes), use_gpus=True, num_gpus_per_node=per_node)
    group = RayWorkerGroup(cluster, GpuReport)
    workers = ray.get(group.run_all_workers_single_data("report"))
    status_gpu_ids = [[str(g) for g in s["gpu_ids"]] for s in group.get_worker_status()]
    group.shutdown()
    # NeMo RL's other GPU paths: a tied group of every GPU of node 0 (one model over a node's
    # GPUs), and a free address and port in a bundle
    tied = RayWorkerGroup(cluster, GpuReport, bundle_indices_list=[(0, list(range(per_node)))], name_prefix="tied")
    tied_workers = ray.get(tied.run_all_workers_single_data("report"))
    address, port = cluster.get_available_address_and_port(0, 0)
    job = os.environ["SLURM_JOB_ID"]
    try:  # a container has no SLURM commands: the test asks SLURM itself while the job holds
        scontrol = subprocess.run(["scontrol", "show", "job", "-d", job], capture_output=True, text=True).stdout
    except FileNotFoundError:
        scontrol = ""
    print(
        json.dumps(
            {
                "workers": workers,
                "status_gpu_ids": status_gpu_ids,
                "tied": {"members": tied_workers, "groups": tied.tied_workers_groups},
                "address_and_port": [address, port],
                "ray_gpus": {n["NodeManagerAddress"]: n["Resources"].get("GPU", 0) for n in nodes},
                "driver_cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES", ""),
                "scontrol": scontrol,
                "opens": opens(),
            }
        ),
        flush=True,
    )
    if sys.argv[2:] == ["hold"]:
        job_dir = Path(os.environ["SLURM_RL_JOB_DIR"])
        (job_dir / "driver_ready").write_text(f"{socket.gethostname()} {os.getpid()}\n")
        deadline = time.monotonic() + 300
        while not (job_dir / "release").exists() and time.monotonic() < deadline:
            time.sleep(0.2)
    tied.shutdown()
    cluster.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
