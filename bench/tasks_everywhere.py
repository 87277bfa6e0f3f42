"""Driver of bench/scale.py: attach, then run one task on every node of the job."""

import socket

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from slurm_rl.distributed import init_ray


@ray.remote(num_cpus=0)
def where() -> str:
    return socket.gethostname()


init_ray()
nodes = [n["NodeID"] for n in ray.nodes() if n["Alive"]]
hosts = ray.get(
    [where.options(scheduling_strategy=NodeAffinitySchedulingStrategy(n, soft=False)).remote() for n in nodes]
)
print(f"one task on each of {len(set(hosts))} nodes")
