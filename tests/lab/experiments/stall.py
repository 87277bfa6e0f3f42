"""Drivers that stall, for slurm-rl's stall watch (issue 58).

argv: MODE [ACTORS_PER_NODE].
- "collective": a metrics step (the stall clock starts), then a worker group of 2 per node in a
  gloo group whose rank 1 never joins the all_reduce the others wait in: the job makes no more
  progress.
- "collective-timeout": the same in a group with gloo's timeout= of 8 s: the peers' all_reduce
  raises, and so does the driver (a collective timeout, as slurm-rl names it).
- "pause": an actor on every node (or ACTORS_PER_NODE, bench/stacks.py), each in its call, a metrics step, then
  nothing until the test's ``go`` file in the job dir (a pause long enough to be a stall), a
  heartbeat (progress again), then exit 0 once the test's ``done`` file is there. Each phase
  announced by ``phase-<name>``.
"""

import os
import sys
import time
from pathlib import Path

import ray

import slurm_rl
from slurm_rl.distributed import RayVirtualCluster, RayWorkerBuilder, RayWorkerGroup, init_ray

job_dir = Path(os.environ["SLURM_RL_JOB_DIR"])


def wait_file(name: str, bound_s: float = 240) -> None:
    deadline = time.monotonic() + bound_s
    while not (job_dir / name).exists() and time.monotonic() < deadline:
        time.sleep(0.2)


@ray.remote(num_cpus=0)
class Resident:
    def serve(self, seconds: float, mark: str) -> None:
        Path(mark).touch()  # in its call now: the driver pauses only once every actor is
        time.sleep(seconds)


def main() -> int:
    mode = sys.argv[1]
    init_ray()
    nodes = [n for n in ray.nodes() if n["Alive"]]
    metrics = slurm_rl.MetricsLog(job_dir, tensorboard=False, wandb=False)
    if mode in ("collective", "collective-timeout"):
        cluster = RayVirtualCluster([2] * len(nodes), use_gpus=False, name="stall")
        group = RayWorkerGroup(cluster, RayWorkerBuilder("hang_worker.HangWorker"), name_prefix="hang")
        metrics.log(step=1, loss=1.0)
        print("driver: all_reduce over", len(group.workers), "ranks", flush=True)
        timeout = (8.0,) if mode == "collective-timeout" else ()  # gloo's timeout: the peers raise
        ray.get(group.run_all_workers_single_data("step", 1, *timeout))  # never returns without one
        return 0
    strategy = ray.util.scheduling_strategies.NodeAffinitySchedulingStrategy
    per_node = int(sys.argv[2]) if len(sys.argv) > 2 else 1
    actors = [
        Resident.options(scheduling_strategy=strategy(n["NodeID"], soft=False)).remote()
        for n in nodes
        for _ in range(per_node)
    ]
    marks = [job_dir / f"serving-{i}" for i in range(len(actors))]
    calls = [a.serve.remote(300, str(m)) for a, m in zip(actors, marks)]  # busy in serve(): its stack shows it
    deadline = time.monotonic() + 120  # actors start in containers: only then is the pause a pause of them all
    while not all(m.exists() for m in marks) and time.monotonic() < deadline:
        time.sleep(0.1)
    metrics.log(step=1, loss=1.0)
    (job_dir / "phase-paused").touch()
    wait_file("go")  # silent meanwhile: a stall
    slurm_rl.heartbeat("resumed")
    (job_dir / "phase-resumed").touch()
    wait_file("done")
    for a in actors:
        ray.kill(a)
    del calls
    return 0


if __name__ == "__main__":
    sys.exit(main())
