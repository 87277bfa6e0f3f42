"""Distributed verification: the same sleep-bound verifier (items that wait, not compute: the
lab's nodes share 2 cores) on a 1-node and a 3-node lab job, in one run; at most 4 tasks at once
per node (slurm_rl.rollouts.verify's max_concurrency_per_node). Prints both times and the
speed-up (goal >= 2.5x). Needs the lab: tests/lab/slurm-lab up --nodes 3. Not a CI gate.

    python bench/verify_scaling.py [ITEMS] [ITEM_SLEEP_S]
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXPERIMENT = ROOT / "tests" / "lab" / "experiments" / "rollouts_check.py"


def run(nodes: int, items: str, sleep_s: str) -> float:
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "slurm_rl.login.cli",
            "submit",
            str(ROOT / "cluster_specs" / "lab.json"),
            str(EXPERIMENT),
            "--nodes",
            str(nodes),
            "--wait",
            "--json",
            "--",
            items,
            sleep_s,
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )
    data = json.loads(res.stdout.splitlines()[-1])
    out = json.loads((Path(data["job_dir"]) / "rollouts_check.json").read_text())
    assert len(out["hosts"]) == nodes, out["hosts"]
    return float(out["verify_s"])


def main() -> None:
    items = sys.argv[1] if len(sys.argv) > 1 else "240"
    sleep_s = sys.argv[2] if len(sys.argv) > 2 else "0.5"
    one, three = run(1, items, sleep_s), run(3, items, sleep_s)
    ideal = int(items) * float(sleep_s)
    print(
        f"verify {items} items of {sleep_s} s (serial {ideal:.1f} s), 4 at once per node: "
        f"1 node {one:.2f} s, 3 nodes {three:.2f} s: {one / three:.2f}x faster on 3 nodes (goal >= 2.5x)"
    )


if __name__ == "__main__":
    main()
