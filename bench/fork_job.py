"""The fork server's benefit on a job (issue 76): a 3-node lab job with 16 zero-CPU actors per
node, its workers forked (``PYTHONHASHSEED=0``, the condition for forking) against exec'd
(``PYTHONHASHSEED=0 SLURM_RL_RAY_FORK=0``: the same seed, so only forking differs), alternating
in one run: the driver's seconds from its first actor to the last one answering, the job's wall
time from submission to its end, and the machine's busy CPU-seconds meanwhile (/proc/stat: run
it on an otherwise idle lab).

    tests/lab/slurm-lab up --nodes 3
    python bench/fork_job.py [--actors 16] [--repeat 2]

Prints fork/exec ratios (below 1: forking saves). Not a CI gate.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from _lab import REPO, SPEC

MANY_ACTORS = REPO / "tests" / "lab" / "experiments" / "many_actors.py"


def busy_cpu_s() -> float:
    with open("/proc/stat") as f:
        v = list(map(int, f.readline().split()[1:]))
    return (sum(v) - v[3] - v[4]) / os.sysconf("SC_CLK_TCK")


def one(actors: int, fork: bool) -> tuple[float, float, float]:
    env = {**os.environ, "PYTHONHASHSEED": "0", "SLURM_RL_RAY_FORK": "1" if fork else "0"}
    argv = [sys.executable, "-m", "slurm_rl", "submit", str(SPEC), str(MANY_ACTORS), "--nodes", "3"]
    argv += ["--cpus-per-node", "1", "--wait", "--json", "--", str(actors), "every-node"]
    c0, t0 = busy_cpu_s(), time.monotonic()
    res = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=900)
    wall, cpu = time.monotonic() - t0, busy_cpu_s() - c0
    if res.returncode != 0:
        raise SystemExit(f"the job failed ({res.returncode}): {res.stderr[-1500:]}")
    job = json.loads([x for x in res.stdout.splitlines() if x.startswith("{")][-1])
    report = json.loads((Path(job["job_dir"]) / "many_actors.json").read_text())
    if report["answered"] != 3 * actors:
        raise SystemExit(f"{report['answered']} of {3 * actors} actors answered: {report}")
    return report["seconds"], wall, cpu


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--actors", type=int, default=16, help="actors per node")
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()
    runs: dict[str, list[tuple[float, float, float]]] = {"exec": [], "fork": []}
    for _ in range(args.repeat):  # alternating, so a drift of the machine hits both
        runs["exec"].append(one(args.actors, False))
        runs["fork"].append(one(args.actors, True))
    med = {w: [statistics.median(r[i] for r in rs) for i in range(3)] for w, rs in runs.items()}
    for w, (actors_s, wall, cpu) in med.items():
        line = f"actors up in {actors_s:.1f} s, job {wall:.1f} s, {cpu:.1f} busy CPU-s"
        print(f"3 nodes x {args.actors} actors, {w}: {line}")
    ratios = [med["fork"][i] / med["exec"][i] for i in range(3)]
    print(f"fork/exec: actors {ratios[0]:.2f}, job wall {ratios[1]:.2f}, busy CPU {ratios[2]:.2f}")


if __name__ == "__main__":
    main()
