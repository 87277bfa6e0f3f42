"""Driver for the container lab tests: where each node's processes run. Prints one JSON line.

argv: EXPECTED_NODES [hold] — with "hold", waits (for attach / cancel tests) after printing.
"""

import json
import os
import sys
import time

import ray

from slurm_rl.distributed import init_ray


def fs_type(path: str) -> str:
    """The file system type of the mount holding ``path`` (tmpfs means RAM)."""
    best, kind = "", "?"
    with open("/proc/self/mounts") as f:
        for line in f:
            _, mount_point, fstype = line.split()[:3]
            inside = path == mount_point or path.startswith(mount_point.rstrip("/") + "/")
            if inside and len(mount_point) >= len(best):
                best, kind = mount_point, fstype
    return kind


@ray.remote(num_cpus=0)
def probe() -> dict:
    temp = ray._private.worker.global_worker.node.get_session_dir_path()  # workers see no SLURM_* variables
    return {
        "host": os.uname().nodename,
        "python": sys.executable,
        "temp_dir": temp,
        "temp_fs": fs_type(temp),
        "token": os.path.exists(os.environ.get("RAY_AUTH_TOKEN_PATH", "/nonexistent")),
        "spec_env": os.environ.get("RAY_DEDUP_LOGS"),
    }


def main() -> int:
    expected = int(sys.argv[1])
    init_ray()
    nodes = [n for n in ray.nodes() if n["Alive"]]
    strategy = ray.util.scheduling_strategies.NodeAffinitySchedulingStrategy
    seen = ray.get([probe.options(scheduling_strategy=strategy(n["NodeID"], soft=False)).remote() for n in nodes])
    report = {
        "nodes": len(nodes),
        "expected": expected,
        "driver_python": sys.executable,
        "driver_cwd": os.getcwd(),
        "ray_address": os.environ.get("RAY_ADDRESS"),
        "per_node": sorted(seen, key=lambda s: s["host"]),
    }
    print(json.dumps(report), flush=True)
    if sys.argv[2:] == ["hold"]:
        while True:
            time.sleep(1)
    return 0 if len(nodes) == expected else 1


if __name__ == "__main__":
    sys.exit(main())
