"""Teardown speed on the lab: from `slurm-rl teardown JOBID` (and from a plain `scancel`) to zero
processes of the job on every node. Baseline in the same run: the raw `ray start` recipe after
scancel, which leaves its daemons behind (counted, then removed by this script).

    python bench/teardown.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

from _lab import HOLD, REPO, job_pids, submit_json, wait_file

NODES = ["node1", "node2", "node3"]


def watch_until_clean(job_id: int, t0: float, out: dict, timeout_s: float = 60) -> None:
    """In a thread: note when no process of the job is left on any node (polls all nodes)."""
    while time.monotonic() - t0 < timeout_s:
        if not any(job_pids(node, job_id) for node in NODES):
            out["clean"] = time.monotonic() - t0
            return
        time.sleep(0.05)


def one(kind: str) -> float:
    data = submit_json(HOLD, 3, "--name", f"bench-{kind}")
    wait_file(Path(data["job_dir"]) / "driver_ready")
    t0 = time.monotonic()
    seen: dict = {}
    watcher = threading.Thread(target=watch_until_clean, args=(data["job_id"], t0, seen))
    watcher.start()
    if kind == "teardown":
        subprocess.run(
            [
                sys.executable,
                "-m",
                "slurm_rl",
                "teardown",
                str(data["job_id"]),
                "--spec",
                str(REPO / "cluster_specs" / "lab.json"),
            ],
            check=True,
            capture_output=True,
            timeout=120,
        )
    else:
        subprocess.run(["scancel", str(data["job_id"])], check=True, timeout=30)
    returned = time.monotonic() - t0
    watcher.join()
    clean = seen.get("clean", float("nan"))
    print(json.dumps({"kind": kind, "command_returned_s": round(returned, 2), "zero_processes_s": round(clean, 2)}))
    return clean


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    td = [one("teardown") for _ in range(args.repeat)]
    sc = [one("scancel") for _ in range(args.repeat)]
    print(f"slurm-rl teardown -> zero processes on 3 nodes: median {statistics.median(td):.2f} s (target <= 5 s)")
    print(f"scancel -> zero processes (bootstraps clean up by themselves): median {statistics.median(sc):.2f} s")


if __name__ == "__main__":
    main()
