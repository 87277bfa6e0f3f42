"""`slurm-rl stacks` on a 3-node job with 8 actors per node (each in a call), against
`slurm-rl status` of the same job in the same run (both read the job dir; stacks also has every
node signal and collect its processes).

    tests/lab/slurm-lab up --nodes 3
    python bench/stacks.py [--per-node 8] [--runs 3]

Not a CI gate (tests/lab/test_stalls_lab.py proves what it says)."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from _lab import REPO, submit_json, wait_file

STALL = REPO / "tests" / "lab" / "experiments" / "stall.py"


def timed(*argv: str) -> tuple[float, subprocess.CompletedProcess[str]]:
    t0 = time.perf_counter()
    res = subprocess.run([sys.executable, "-m", "slurm_rl", *argv], capture_output=True, text=True, timeout=120)
    return time.perf_counter() - t0, res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--per-node", type=int, default=8)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    job = submit_json(STALL, 3, "--", "pause", str(args.per_node))
    jd, jid = Path(job["job_dir"]), str(job["job_id"])
    try:
        deadline = time.monotonic() + 300
        while not (jd / "phase-paused").exists():
            if time.monotonic() > deadline:
                raise SystemExit(f"job {jid} never paused: see {jd / 'logs'}")
            time.sleep(0.2)
        status = min(timed("status", jid, "--json")[0] for _ in range(args.runs))
        stacks = []
        for _ in range(args.runs):
            took, res = timed("stacks", jid)
            if res.returncode != 0:
                raise SystemExit(res.stderr)
            stacks.append(took)
        head = res.stdout.splitlines()[0]
        print(head)
        print(f"slurm-rl status: {status:.2f} s (best of {args.runs})")
        print(f"slurm-rl stacks: {min(stacks):.2f} s best, {max(stacks):.2f} s worst of {args.runs}")
        print(f"stacks/status: {min(stacks) / status:.2f}x")
    finally:
        (jd / "go").touch()
        (jd / "done").touch()
        wait_file(jd / "exit_code", 120)
    print(json.dumps({"job": jid, "stacks_s": [round(x, 2) for x in stacks], "status_s": round(status, 2)}))


if __name__ == "__main__":
    main()
