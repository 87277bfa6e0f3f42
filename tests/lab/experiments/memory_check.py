"""Prints one JSON line: each node's Ray `memory` and `object_store_memory` (what Ray plans
with), then runs a task on the last node that allocates argv[1] MiB and reports how it ended.
Exit 0 if the allocation succeeded, 1 if the task died; with argv[2] "survive" the task has
Ray's default 3 retries and the driver catches its error and exits 0 (a driver that lives on)."""

import json
import sys

import ray

from slurm_rl.distributed import init_ray


@ray.remote(num_cpus=0, max_retries=0)
def allocate(mib: int) -> str:
    block = bytearray(mib * 2**20)
    for i in range(0, len(block), 4096):  # touch every page: resident, not just reserved
        block[i] = 1
    import os

    return os.uname().nodename


def main() -> int:
    mib = int(sys.argv[1])
    init_ray()
    nodes = sorted((n for n in ray.nodes() if n["Alive"]), key=lambda n: n["NodeManagerAddress"])
    per_node = {
        n["NodeManagerAddress"]: {
            "memory": int(n["Resources"].get("memory", 0)),
            "object_store_memory": int(n["Resources"].get("object_store_memory", 0)),
        }
        for n in nodes
    }
    strategy = ray.util.scheduling_strategies.NodeAffinitySchedulingStrategy(nodes[-1]["NodeID"], soft=False)
    survive = sys.argv[2:] == ["survive"]
    try:
        task = allocate.options(scheduling_strategy=strategy, max_retries=3 if survive else 0)
        where = ray.get(task.remote(mib))
        outcome = f"allocated on {where}"
    except Exception as exc:  # noqa: BLE001 - the report is the point
        outcome = f"died: {type(exc).__name__}"
    print(json.dumps({"per_node": per_node, "outcome": outcome}), flush=True)
    return 0 if outcome.startswith("allocated") or survive else 1


if __name__ == "__main__":
    sys.exit(main())
