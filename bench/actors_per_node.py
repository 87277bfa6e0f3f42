"""Many zero-CPU actors on one node of a lab job: every one must answer, and what each costs.

    tests/lab/slurm-lab up --nodes 3
    python bench/actors_per_node.py [--many 100] [--few 10]

The old per-job port block stopped at ~80 workers per node (Ray: "No available ports"); worker
ports are now the OS's (``--min/max-worker-port=0``, asserted by tests/unit/test_ports_paths_events.py),
so a job holds as many actors per node as it has memory for. This is a scale run, not a test
(it starts ~100 Python processes, minutes of CPU on a 2-core CI machine): the baseline is a
job with few actors, in the same run; the ratio is seconds per actor, many against few.
Not a CI gate.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from _lab import REPO, submit

MANY_ACTORS = REPO / "tests" / "lab" / "experiments" / "many_actors.py"


def run(n: int) -> dict:
    res = submit(MANY_ACTORS, 1, "--wait", "--", str(n), timeout=900)
    if res.returncode != 0:
        raise SystemExit(f"the {n}-actor job failed ({res.returncode}): {res.stderr[-1500:]}")
    job = json.loads([x for x in res.stdout.splitlines() if x.startswith("{")][-1])
    report = json.loads((Path(job["job_dir"]) / "many_actors.json").read_text())
    if report["answered"] != n:
        raise SystemExit(f"{report['answered']} of {n} actors answered: {report}")
    return report


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--many", type=int, default=100)
    ap.add_argument("--few", type=int, default=10)
    args = ap.parse_args()
    few, many = run(args.few), run(args.many)
    per_few, per_many = few["seconds"] / args.few, many["seconds"] / args.many
    print(f"{args.few} actors: {few['seconds']} s ({per_few:.2f} s each), all answered")
    print(f"{args.many} actors: {many['seconds']} s ({per_many:.2f} s each), all answered")
    print(f"seconds per actor, {args.many} vs {args.few}: {per_many / per_few:.2f}x")


if __name__ == "__main__":
    main()
