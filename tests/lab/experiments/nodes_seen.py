"""Writes `<job dir>/answer.json`: the hosts of the job's Ray nodes and what slurm_rl.attempt()
says (a job preflight ran again without a bad node knows which it left out)."""

import json
import os
from pathlib import Path

import ray

import slurm_rl
from slurm_rl.distributed import init_ray


@ray.remote(num_cpus=0)
def host() -> str:
    return os.uname().nodename


init_ray()
strategy = ray.util.scheduling_strategies.NodeAffinitySchedulingStrategy
on = [host.options(scheduling_strategy=strategy(n["NodeID"], soft=False)) for n in ray.nodes() if n["Alive"]]
answer = {"hosts": sorted(ray.get([h.remote() for h in on])), "attempt": slurm_rl.attempt().as_dict()}
(Path(os.environ["SLURM_RL_JOB_DIR"]) / "answer.json").write_text(json.dumps(answer))
print("answer:", json.dumps(answer), flush=True)
