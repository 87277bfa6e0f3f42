"""Prints what slurm_rl.attempt() says (one JSON line, key "attempt"); exits 5 on the first
attempt, 0 on a later one."""

import json
import sys

import slurm_rl

attempt = slurm_rl.attempt()
print(json.dumps({"attempt": attempt.as_dict()}), flush=True)
sys.exit(5 if attempt.attempt == 0 else 0)
