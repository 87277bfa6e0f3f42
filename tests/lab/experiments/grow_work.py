"""Driver for the growing test: it listens for members coming and going
(``slurm_rl.on_member_change``), and gives each member node that joins a Ray task pinned to it
(the driver rebalancing its work onto grown nodes). What it saw goes to grow.json in the job dir:
the changes heard, the work done per member node, the members as ``slurm_rl.members()`` says
them, the job's nodes as ``slurm_rl.nodes()`` does. ``driver_ready`` once listening; it ends
when ``release`` appears (within 400 s), by raising an exception when the file says ``raise``.

    grow_work.py REPO
"""

import dataclasses
import json
import os
import socket
import sys
import time
from pathlib import Path

repo = sys.argv[1]
sys.path.insert(0, repo)

import ray  # noqa: E402
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy  # noqa: E402

import slurm_rl  # noqa: E402
from slurm_rl.distributed import init_ray  # noqa: E402

job_dir = Path(os.environ["SLURM_RL_JOB_DIR"])
init_ray()
changes: list[dict] = []
slurm_rl.on_member_change(changes.append, poll_s=0.2)
(job_dir / "driver_ready").write_text("ready\n")


@ray.remote(num_cpus=1)
def where() -> str:
    return socket.gethostname()


worked: dict[str, str] = {}  # member node -> where its pinned task ran
deadline = time.monotonic() + 400
while time.monotonic() < deadline and not (job_dir / "release").exists():
    ray_nodes = {n["NodeManagerHostname"]: n["NodeID"] for n in ray.nodes() if n["Alive"]}
    for member in slurm_rl.members():
        for node in member.nodes:
            if node not in worked and node in ray_nodes:
                pinned = NodeAffinitySchedulingStrategy(ray_nodes[node], soft=False)
                worked[node] = ray.get(where.options(scheduling_strategy=pinned).remote(), timeout=60)
                print(f"member {member.member}: work ran on {worked[node]}", flush=True)
    members = [dataclasses.asdict(m) for m in slurm_rl.members()]
    state = {"changes": changes, "worked": worked, "members": members, "nodes": slurm_rl.nodes()}
    (job_dir / "grow.json.tmp").write_text(json.dumps(state))  # whole or not at all: the test reads it meanwhile
    (job_dir / "grow.json.tmp").replace(job_dir / "grow.json")
    time.sleep(0.3)
if (job_dir / "release").exists() and (job_dir / "release").read_text().strip() == "raise":
    raise RuntimeError("the driver fails on purpose, with a member in the job")
print("done", flush=True)
