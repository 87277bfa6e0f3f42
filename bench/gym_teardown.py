"""Teardown of a NeMo Gym-shaped job on the lab (issue: Gym jobs took 20-50 s to end): a plain
ray.init() driver whose server actors start HTTP servers in sessions of their own and are left
running when it returns (bench/gym_like.py), against a driver that leaves nothing running
(examples/hello.py) in the same run. Measures driver end -> job end (events.jsonl) and checks
that no process of the job is left on any node.

    python bench/gym_teardown.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from _lab import REPO, job_pids, submit

NODES = ["node1", "node2", "node3"]
KINDS = {"plain": REPO / "examples" / "hello.py", "gym-shaped": Path(__file__).with_name("gym_like.py")}


def one(experiment: Path) -> tuple[float, int]:
    res = submit(experiment, 3, "--wait", timeout=300)
    data = json.loads(res.stdout.splitlines()[-1])
    events = [json.loads(line) for line in Path(data["job_dir"], "events.jsonl").read_text().splitlines()]
    driver_end = next(e["t"] for e in events if e["event"] == "driver_end")
    job_end = max(e["t"] for e in events if e["event"] == "job_end")
    left = sum(len(job_pids(n, data["job_id"])) for n in NODES)
    return job_end - driver_end, left


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args()
    medians = {}
    for kind, experiment in KINDS.items():
        runs = [one(experiment) for _ in range(args.repeat)]
        medians[kind] = statistics.median(s for s, _ in runs)
        print(
            f"{kind:11s} driver end -> job end: {[round(s, 2) for s, _ in runs]} s; "
            f"left on nodes: {[n for _, n in runs]}"
        )
    print(f"gym-shaped / plain: {medians['gym-shaped'] / medians['plain']:.2f}x")


if __name__ == "__main__":
    main()
