"""Prints one JSON line: the open-files limits (soft, hard) of the driver and of a Ray task on
every node, and what cluster.json reports."""

import json
import os
import resource
from pathlib import Path

import ray

from slurm_rl.distributed import init_ray


@ray.remote(num_cpus=0)
def limits() -> tuple[str, list[int]]:
    return os.uname().nodename, list(resource.getrlimit(resource.RLIMIT_NOFILE))


init_ray()
strategy = ray.util.scheduling_strategies.NodeAffinitySchedulingStrategy
nodes = [n["NodeID"] for n in ray.nodes() if n["Alive"]]
workers = dict(ray.get([limits.options(scheduling_strategy=strategy(n, soft=False)).remote() for n in nodes]))
cluster = json.loads((Path(os.environ["SLURM_RL_JOB_DIR"]) / "cluster.json").read_text())
driver = list(resource.getrlimit(resource.RLIMIT_NOFILE))
print(json.dumps({"driver": driver, "workers": workers, "cluster_open_files": cluster.get("open_files")}))
