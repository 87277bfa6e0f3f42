"""A soak job (bench/soak.py): one task per node of the job computes its share of a known sum;
the driver checks the answer (not only its exit code), writes ``answer.json``, says it is
running (``soak_ready``), then holds HOLD_S seconds (so a fault can land while it runs) and
exits 0, or raises with --raise (an injected driver exception). On a job with GPUs, one task per
node asks for one GPU and reports the device it sees (the answer: one device on every node).
With --oom MIB a task on the last node allocates MIB after the answer (the cgroup lab's OOM
fault): its death fails the job.

argv: HOLD_S [--raise] [--oom MIB]
"""

import json
import os
import sys
import time
from pathlib import Path

import ray

from slurm_rl.distributed import init_ray

job_dir = Path(os.environ["SLURM_RL_JOB_DIR"])


@ray.remote(num_cpus=0)
def share(k: int, n: int) -> int:
    return sum(range(k, 100_000, n))


@ray.remote(num_cpus=0, num_gpus=1)
def device() -> tuple[str, str]:
    return os.uname().nodename, os.environ.get("CUDA_VISIBLE_DEVICES", "")


@ray.remote(num_cpus=0, max_retries=0)
def allocate(mib: int) -> None:
    block = bytearray(mib * 2**20)
    for i in range(0, len(block), 4096):  # every page touched: resident, not just reserved
        block[i] = 1


init_ray()
nodes = [x for x in ray.nodes() if x["Alive"]]
strategy = ray.util.scheduling_strategies.NodeAffinitySchedulingStrategy
parts = [
    share.options(scheduling_strategy=strategy(x["NodeID"], soft=False)).remote(i, len(nodes))
    for i, x in enumerate(nodes)
]
total = sum(ray.get(parts, timeout=120))
ok = total == sum(range(100_000))
answer = {"ok": ok, "nodes": len(nodes), "total": total}
if ray.cluster_resources().get("GPU"):
    seen = ray.get(
        [
            device.options(scheduling_strategy=strategy(x["NodeID"], soft=False)).remote()
            for x in nodes
            if x["Resources"].get("GPU")
        ],
        timeout=120,
    )
    answer["gpus"] = dict(seen)
    answer["ok"] = ok = ok and len(seen) == len(nodes) and all(len(d.split(",")) == 1 and d for _, d in seen)
(job_dir / "answer.json").write_text(json.dumps(answer) + "\n")
print(f"ANSWER {'ok' if ok else 'WRONG'} on {len(nodes)} nodes", flush=True)
(job_dir / "soak_ready").touch()
end = time.monotonic() + float(sys.argv[1])
while time.monotonic() < end:
    time.sleep(0.2)
if "--oom" in sys.argv:
    mib = int(sys.argv[sys.argv.index("--oom") + 1])
    ray.get(allocate.options(scheduling_strategy=strategy(nodes[-1]["NodeID"], soft=False)).remote(mib))
if "--raise" in sys.argv:
    raise RuntimeError("soak: injected driver exception")
sys.exit(0 if ok else 3)
