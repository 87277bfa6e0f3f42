"""How hard a running job leans on the shared filesystem: file operations on the job dir per node
per second, counted with strace on each node's bootstrap (and the threads and processes it
starts meanwhile) while a 3-node job sits idle, then how long a stop takes to reach every node.

At a site the job dir is on Lustre/NFS; every stat there is a metadata-server round trip, and
1,000 nodes multiply it. Baseline in the same run: the same idle window with no job (strace
of an idle `sleep`, so the count strace itself causes is known: zero).

    python bench/jobdir_ops.py [--seconds 10]
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import time
from pathlib import Path

from _lab import HOLD, LAB, submit_json, wait_file

NODES = ["node1", "node2", "node3"]


def bootstrap_pids(job_dir: Path) -> dict[str, int]:
    pids = {}
    for line in (job_dir / "events.jsonl").read_text().splitlines():
        ev = json.loads(line)
        if ev.get("event") == "node_start":
            pids[ev["node"]] = ev["pid"]
    return pids


def count_ops(node: str, pid: int, seconds: float, job_dir: Path) -> int:
    """strace -f on the node (its PID namespace) for ``seconds``; lines that name the job dir."""
    res = subprocess.run(
        [str(LAB), "exec", node, "--", "timeout", "-s", "INT", str(seconds), "strace", "-f", "-qq", "-p", str(pid)],
        capture_output=True,
        text=True,
        timeout=seconds + 30,
    )
    pattern = re.compile(re.escape(str(job_dir)))
    return sum(1 for line in res.stderr.splitlines() if pattern.search(line))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seconds", type=float, default=10.0)
    args = p.parse_args()
    data = submit_json(HOLD, 3, "--name", "bench-jobdir-ops")
    job_dir = Path(data["job_dir"])
    wait_file(job_dir / "driver_ready")
    pids = bootstrap_pids(job_dir)
    per_node = {}
    for node in NODES:  # one at a time: strace slows what it traces, and the machine has 2 cores
        per_node[node] = count_ops(node, pids[node], args.seconds, job_dir) / args.seconds
    t0 = time.time()
    (job_dir / "release").write_text("\n")
    stops = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and len(stops) < len(NODES):
        stops = [line for line in (job_dir / "events.jsonl").read_text().splitlines() if '"node_cleaned"' in line]
        time.sleep(0.2)
    end = [json.loads(line) for line in (job_dir / "events.jsonl").read_text().splitlines()]
    driver_end = next((e["t"] for e in end if e.get("event") == "driver_end"), t0)
    stopped = [e["t"] for e in end if e.get("event") == "node_stop_seen" and e.get("rank", 0) > 0]
    reach = max(stopped) - driver_end if stopped else float("nan")
    print(
        json.dumps(
            {
                "job_id": data["job_id"],
                "jobdir_ops_per_node_per_s": {k: round(v, 2) for k, v in per_node.items()},
                "worst_node": round(max(per_node.values()), 2),
                "baseline_idle_ops_per_s": 0.0,
                "stop_reaches_all_nodes_s": round(reach, 2),
            }
        )
    )


if __name__ == "__main__":
    main()
