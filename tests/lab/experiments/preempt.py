"""Checkpoints when SLURM warns of the time limit (slurm_rl.on_preempt), then exits 0."""

import os
import sys
import time
from pathlib import Path

import slurm_rl

warned = []
slurm_rl.on_preempt(lambda: warned.append(time.time()))
job_dir = Path(os.environ["SLURM_RL_JOB_DIR"])
deadline = time.monotonic() + 170
while not warned and time.monotonic() < deadline:
    time.sleep(0.2)
if not warned:
    sys.exit(9)
(job_dir / "checkpoint").write_text(f"saved at {warned[0]}\n")
print("checkpoint written after the warning signal", flush=True)
