"""A run longer than one job: --steps steps of a deterministic recurrence, a checkpoint in
slurm_rl.run_dir() after every step; on SLURM's time-limit warning it asks for the next job
(slurm_rl.requeue()), which resumes from the checkpoint. Writes result.json when done."""

import argparse
import json
import os
import time

import slurm_rl

p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=40)
p.add_argument("--step-s", type=float, default=0.25)
args = p.parse_args()

warned: list[float] = []
slurm_rl.on_preempt(lambda: warned.append(time.time()))
run_dir = slurm_rl.run_dir()
me = os.environ["SLURM_JOB_ID"]
checkpoint = run_dir / "checkpoint.json"
state = json.loads(checkpoint.read_text()) if checkpoint.exists() else {"step": 0, "x": 1, "jobs": []}
print(f"job {me}: run dir {run_dir}, starting at step {state['step']}", flush=True)
state["jobs"].append(me)
log = slurm_rl.MetricsLog(run_dir, tensorboard=False)
while state["step"] < args.steps:
    time.sleep(args.step_s)
    state["x"] = (state["x"] * 31 + state["step"]) % 1_000_003
    state["step"] += 1
    tmp = checkpoint.with_suffix(".tmp")
    tmp.write_text(json.dumps(state))
    os.replace(tmp, checkpoint)
    log.log(step=state["step"], x=state["x"])
    if warned and state["step"] < args.steps:
        print(f"job {me}: time-limit warning at step {state['step']}; the next job goes on", flush=True)
        slurm_rl.requeue(f"time-limit warning at step {state['step']}")
(run_dir / "result.json").write_text(json.dumps(state))
print(f"job {me}: done, x={state['x']}", flush=True)
