"""Driver for the healing tests: a worker group with restarts, one worker per node (a 2-CPU
bundle fills a lab node, so a lost node's bundle finds no room on the survivors: only a
replacement node takes it), doing rounds of work. Each round's answers and the workers' nodes
go to heal.json in the job dir; `driver_ready` once the group is up. It stops once RESTORED
rounds have run after a restart (or `release` appears), within 400 s.

    heal_work.py REPO [RESTORED]
"""

import json
import os
import sys
import time
from pathlib import Path

repo = sys.argv[1]
restored_rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
sys.path.insert(0, repo)
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [repo, os.environ.get("PYTHONPATH")]))

from slurm_rl.distributed import RayVirtualCluster, RayWorkerGroup, init_ray  # noqa: E402

job_dir = Path(os.environ["SLURM_RL_JOB_DIR"])
init_ray()
nodes = int(json.loads((job_dir / "manifest.json").read_text())["nodes"])
cluster = RayVirtualCluster([1] * nodes, use_gpus=False, max_colocated_worker_groups=2, name="heal")
group = RayWorkerGroup(cluster, "tests.unit.workers.reliable.ProbeWorker", name_prefix="heal", restart_on_failure=True)


def hosts() -> list[str]:
    return [s["node"].split()[0] for s in group.get_worker_status()]


rounds: list[dict] = []
start = hosts()
(job_dir / "driver_ready").write_text(" ".join(start) + "\n")
print("workers on", start, flush=True)
deadline = time.monotonic() + 400
after = 0
while time.monotonic() < deadline and after < restored_rounds and not (job_dir / "release").exists():
    t0 = time.monotonic()
    answers = group.get_results(group.run_all_workers_single_data("sleep", 1.0))
    on = hosts()
    rounds.append({"answers": answers, "hosts": on, "seconds": round(time.monotonic() - t0, 1)})
    if on != start:
        after += 1
    (job_dir / "heal.json.tmp").write_text(json.dumps({"start": start, "rounds": rounds}))  # read meanwhile: whole
    (job_dir / "heal.json.tmp").replace(job_dir / "heal.json")
    print("round", len(rounds), answers, on, flush=True)
group.shutdown(force=True)
print("done", flush=True)
