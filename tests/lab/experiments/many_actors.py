"""Driver: N zero-CPU actors on the head node of the job (or on each node); every one must answer.

many_actors.py N [every-node]
"""

import json
import os
import sys
import time
from pathlib import Path

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from slurm_rl.distributed import init_ray


@ray.remote(num_cpus=0)
class Pinger:
    def ping(self) -> int:
        return os.getpid()


init_ray()
n = int(sys.argv[1])
here = [ray.get_runtime_context().get_node_id()]
if sys.argv[2:] == ["every-node"]:
    here = [node["NodeID"] for node in ray.nodes() if node["Alive"]]
t0 = time.monotonic()
actors = [
    Pinger.options(scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False)).remote()
    for node in here
    for _ in range(n)
]
pids = ray.get([a.ping.remote() for a in actors], timeout=600)
report = {"actors": len(actors), "answered": len(set(pids)), "seconds": round(time.monotonic() - t0, 1)}
(Path(os.environ["SLURM_RL_JOB_DIR"]) / "many_actors.json").write_text(json.dumps(report))
print(json.dumps(report))
