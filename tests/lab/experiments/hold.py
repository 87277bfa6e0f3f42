"""A driver that keeps the job's Ray busy until released: one actor per node, then it waits for
`<job dir>/release` (bounded). Writes `<job dir>/driver_ready` once the actors are up.

argv: [MODE] where MODE is "ok" (exit 0 once released), "raise" (raise once released), or
"actor-died" (exit 0 if an actor died, 1 otherwise, after release or when one dies).
"""

import os
import sys
import time
from pathlib import Path

import ray

from slurm_rl.distributed import init_ray


@ray.remote(num_cpus=0)
class Resident:
    def pid(self) -> int:
        return os.getpid()

    def host(self) -> str:
        return os.uname().nodename


def main() -> int:
    mode = sys.argv[1] if len(sys.argv) > 1 else "ok"
    job_dir = Path(os.environ["SLURM_RL_JOB_DIR"])
    init_ray()
    strategy = ray.util.scheduling_strategies.NodeAffinitySchedulingStrategy
    nodes = [n for n in ray.nodes() if n["Alive"]]
    actors = [Resident.options(scheduling_strategy=strategy(n["NodeID"], soft=False)).remote() for n in nodes]
    pids = ray.get([a.pid.remote() for a in actors])
    hosts = ray.get([a.host.remote() for a in actors])
    (job_dir / "driver_ready").write_text("\n".join(f"{h} {p}" for h, p in zip(hosts, pids)) + "\n")
    print("driver ready:", list(zip(hosts, pids)), flush=True)
    deadline = time.monotonic() + 300
    while not (job_dir / "release").exists() and time.monotonic() < deadline:
        if mode == "actor-died":
            try:
                ray.get([a.pid.remote() for a in actors], timeout=5)
            except ray.exceptions.RayActorError as exc:
                print("an actor died:", type(exc).__name__, flush=True)
                return 0
        time.sleep(0.2)
    if mode == "raise":
        raise RuntimeError("the experiment failed on purpose")
    return 1 if mode == "actor-died" else 0


if __name__ == "__main__":
    sys.exit(main())
