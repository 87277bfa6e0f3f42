"""A driver that reports ``slurm_rl.time_left()`` until released: every 0.5 s it writes
``{"now": epoch, "left": seconds}`` to ``<job dir>/time_left.json``, then exits 0 once
``<job dir>/release`` exists (bounded)."""

import json
import math
import os
import time
from pathlib import Path

import slurm_rl

job_dir = Path(os.environ["SLURM_RL_JOB_DIR"])
deadline = time.monotonic() + 240
while not (job_dir / "release").exists() and time.monotonic() < deadline:
    left = slurm_rl.time_left()
    report = {"now": time.time(), "left": None if math.isinf(left) else left}
    (job_dir / "time_left.tmp").write_text(json.dumps(report))
    (job_dir / "time_left.tmp").rename(job_dir / "time_left.json")
    time.sleep(0.5)
