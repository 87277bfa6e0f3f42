"""A soak job (bench/soak.py): one task per node of the job computes its share of a known sum;
the driver checks the answer (not only its exit code), writes ``answer.json``, says it is
running (``soak_ready``), then holds HOLD_S seconds (so a fault can land while it runs) and
exits 0, or raises with --raise (an injected driver exception).

argv: HOLD_S [--raise]
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


init_ray()
nodes = [x for x in ray.nodes() if x["Alive"]]
strategy = ray.util.scheduling_strategies.NodeAffinitySchedulingStrategy
parts = [
    share.options(scheduling_strategy=strategy(x["NodeID"], soft=False)).remote(i, len(nodes))
    for i, x in enumerate(nodes)
]
total = sum(ray.get(parts, timeout=120))
ok = total == sum(range(100_000))
(job_dir / "answer.json").write_text(json.dumps({"ok": ok, "nodes": len(nodes), "total": total}) + "\n")
print(f"ANSWER {'ok' if ok else 'WRONG'} on {len(nodes)} nodes", flush=True)
(job_dir / "soak_ready").touch()
end = time.monotonic() + float(sys.argv[1])
while time.monotonic() < end:
    time.sleep(0.2)
if "--raise" in sys.argv:
    raise RuntimeError("soak: injected driver exception")
sys.exit(0 if ok else 3)
