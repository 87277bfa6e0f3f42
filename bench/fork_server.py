"""A Ray node whose Python processes start as forks of its fork server (PYTHONHASHSEED fixed) vs
as fresh interpreters (``SLURM_RL_RAY_FORK=0``), on a fresh local Ray each, in one run: the
machine's busy CPU-seconds (from /proc/stat: run it on an idle machine) and the wall time from
``init_ray()`` to N actors answering, the node's start and its two agents included.

    python bench/fork_server.py [--actors 1 8] [--repeat 3]

Prints fork/exec ratios (target: below 1). Not a CI gate.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys

ONE_RUN = """
import os, sys, time
def busy():
    v = list(map(int, open("/proc/stat").readline().split()[1:]))
    return (sum(v) - v[3] - v[4]) / os.sysconf("SC_CLK_TCK")
c0, t0 = busy(), time.perf_counter()
import ray
from slurm_rl.distributed import init_ray
init_ray()

@ray.remote(num_cpus=0)
class Actor:
    def ping(self):
        return os.getpid()

actors = [Actor.remote() for _ in range(int(sys.argv[1]))]
ray.get([a.ping.remote() for a in actors])
print(time.perf_counter() - t0, busy() - c0)
ray.shutdown()
"""


def one(actors: int, fork: str) -> tuple[float, float]:
    env = {
        **os.environ,
        "SLURM_RL_RAY_FORK": fork,
        "RAY_AUTH_MODE": "disabled",
        "PYTHONHASHSEED": "0",
    }  # forking needs it
    env.pop("RAY_ADDRESS", None)
    out = subprocess.run(
        [sys.executable, "-c", ONE_RUN, str(actors)], env=env, capture_output=True, text=True, check=True
    ).stdout
    wall, cpu = out.split()[-2:]
    return float(wall), float(cpu)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--actors", type=int, nargs="+", default=[1, 8])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    for actors in args.actors:
        runs: dict[str, list[tuple[float, float]]] = {"exec": [], "fork": []}
        for _ in range(args.repeat):  # alternating, so a drift of the machine hits both
            runs["exec"].append(one(actors, "0"))
            runs["fork"].append(one(actors, "1"))
        med = {w: (statistics.median(r[0] for r in rs), statistics.median(r[1] for r in rs)) for w, rs in runs.items()}
        for w, (wall, cpu) in med.items():
            print(f"{actors:3d} actors, {w}: {wall:.2f} s, {cpu:.2f} busy CPU-s")
        wall_ratio, cpu_ratio = (med["fork"][i] / med["exec"][i] for i in (0, 1))
        print(f"{actors:3d} actors, fork/exec: wall {wall_ratio:.2f}, CPU {cpu_ratio:.2f}")


if __name__ == "__main__":
    main()
