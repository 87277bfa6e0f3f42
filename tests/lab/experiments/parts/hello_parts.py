"""bench/parts.py's driver: says hello with the services it sees; with --hold it waits (bounded)
for <job dir>/release (a judge instance is killed meanwhile)."""

import json
import sys
import time

import slurm_rl
from slurm_rl.distributed import init_ray

init_ray()
print("hello", json.dumps({k: v["ready"] for k, v in slurm_rl.services().items()}), flush=True)
if "--hold" in sys.argv:
    end = time.monotonic() + 120
    while not (slurm_rl.run_dir() / "release").exists() and time.monotonic() < end:
        time.sleep(0.2)
    time.sleep(3)  # the restarted instance comes up meanwhile
