"""A driver that resumes from its checkpoint on a retried attempt, knowing why it runs again
(slurm_rl.attempt()). Attempt 0 checkpoints step 3 of 6, writes `<job dir>/driver_ready`, then
holds its Ray nodes until released or killed (bounded); a later attempt goes on from the
checkpoint. Writes `<job dir>/answer.json`: the attempts seen, where it resumed, its hosts.

argv: [HOLD_S] how long attempt 0 holds at most (default 240)."""

import json
import os
import sys
import time
from pathlib import Path

import ray

import slurm_rl
from slurm_rl.distributed import init_ray


@ray.remote(num_cpus=0)
def host() -> str:
    return os.uname().nodename


def main() -> int:
    hold_s = float(sys.argv[1]) if len(sys.argv) > 1 else 240.0
    job_dir = Path(os.environ["SLURM_RL_JOB_DIR"])
    checkpoint = slurm_rl.run_dir() / "checkpoint.json"
    attempt = slurm_rl.attempt()
    print("attempt:", json.dumps(attempt.as_dict()), flush=True)
    state = json.loads(checkpoint.read_text()) if checkpoint.exists() else {"step": 0, "attempts": []}
    resumed_from = state["step"]
    state["attempts"].append(attempt.as_dict())
    init_ray()
    strategy = ray.util.scheduling_strategies.NodeAffinitySchedulingStrategy
    nodes = [n for n in ray.nodes() if n["Alive"]]
    hosts = sorted(
        ray.get([host.options(scheduling_strategy=strategy(n["NodeID"], soft=False)).remote() for n in nodes])
    )
    for step in range(state["step"], 6):
        state["step"] = step + 1
        checkpoint.write_text(json.dumps(state))
        slurm_rl.heartbeat(f"step {step + 1}")
        if attempt.attempt == 0 and step + 1 == 3:
            (job_dir / "driver_ready").write_text(" ".join(hosts) + "\n")
            deadline = time.monotonic() + hold_s
            while not (job_dir / "release").exists() and time.monotonic() < deadline:
                time.sleep(0.5)
    answer = {"resumed_from": resumed_from, "attempts": state["attempts"], "hosts": hosts}
    (job_dir / "answer.json").write_text(json.dumps(answer))
    print("answer:", json.dumps(answer), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
