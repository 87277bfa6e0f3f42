"""Fails on the first attempt (exit 5), succeeds on the requeued one."""

import os
import sys

attempt = int(os.environ.get("SLURM_RESTART_COUNT", "0") or 0)
print(f"attempt {attempt}", flush=True)
sys.exit(5 if attempt == 0 else 0)
