"""Driver: slurm_rl.rollouts across the job's nodes. A sleep-bound verifier over 240 items
(SPREAD, at most 4 at once per node, one item hangs past its timeout), then a rollout pool of
40 prompts into rollouts.jsonl, run twice (the second run redoes nothing). Writes
rollouts_check.json into the job dir.

    rollouts_check.py [ITEMS] [ITEM_SLEEP_S]
"""

import json
import os
import socket
import sys
import time
from pathlib import Path

from slurm_rl.distributed import init_ray
from slurm_rl.rollouts import RolloutPool, verify

items = int(sys.argv[1]) if len(sys.argv) > 1 else 240
item_sleep = float(sys.argv[2]) if len(sys.argv) > 2 else 0.02
job_dir = Path(os.environ["SLURM_RL_JOB_DIR"])


def check(item: int) -> dict:
    time.sleep(30 if item == 7 else item_sleep)  # item 7 hangs: its timeout turns it into a failed item
    return {"item": item, "correct": item % 3 == 0}


def rollout(prompt: str) -> tuple[str, float]:
    time.sleep(0.01)
    return prompt[::-1], float(len(prompt) % 2)


def warm(item: int) -> int:
    time.sleep(0.2)
    return item


init_ray()
verify(warm, range(48), max_concurrency_per_node=4, progress=False)  # worker processes up: time the work, not them
t0 = time.perf_counter()
verdicts = verify(check, range(items), timeout_s=1.0, max_concurrency_per_node=4, progress=False)
verify_s = time.perf_counter() - t0
pool = RolloutPool(rollout)
first = pool.run([f"prompt-{i}" for i in range(40)], progress=False)
second = pool.run([f"prompt-{i}" for i in range(40)], progress=False)
out = {
    "verify_s": verify_s,
    "in_order": [v.value["item"] for v in verdicts if v.ok] == [i for i in range(items) if i != 7],
    "failed": [(i, v.error) for i, v in enumerate(verdicts) if not v.ok],
    "hosts": sorted({v.host for v in verdicts}),
    "rollouts_new": [len(first), len(second)],
    "rollout_lines": len((job_dir / "rollouts.jsonl").read_text().splitlines()),
    "rollout_hosts": sorted({r["host"] for r in first}),
    "driver": socket.gethostname(),
}
(job_dir / "rollouts_check.json").write_text(json.dumps(out, indent=1))
print(json.dumps(out))
