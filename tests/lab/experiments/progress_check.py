"""Progress as slurm-rl sees it: a metrics step, then only a worker's lines (Ray forwards them
into the driver's log: no progress), then a heartbeat. Each phase is announced by a file in the
job dir (``phase-<name>``) and waits for the test's ``go-<name>`` (bounded)."""

import os
import time
from pathlib import Path

import ray

import slurm_rl
from slurm_rl.distributed import init_ray

job_dir = Path(os.environ["SLURM_RL_JOB_DIR"])


def phase(name: str) -> None:
    (job_dir / f"phase-{name}").touch()
    deadline = time.monotonic() + 120
    while not (job_dir / f"go-{name}").exists() and time.monotonic() < deadline:
        time.sleep(0.2)


@ray.remote(num_cpus=0)
def chatter(seconds: float) -> int:
    end, n = time.monotonic() + seconds, 0
    while time.monotonic() < end:
        print(f"worker line {n}", flush=True)
        n += 1
        time.sleep(0.3)
    return n


init_ray()
print("driver: loading", flush=True)
slurm_rl.MetricsLog(job_dir, tensorboard=False, wandb=False).log(step=3, loss=0.5)
phase("step")
assert ray.get(chatter.remote(8.0)) > 10  # the driver itself says nothing meanwhile
phase("chatter")
slurm_rl.heartbeat("eval")
phase("heartbeat")
