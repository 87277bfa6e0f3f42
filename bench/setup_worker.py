"""Starting actors that have a runtime_env (every worker-group actor has one) through Ray's own
setup script vs slurm-rl's light one, on a fresh local Ray each, in one run: wall time per actor
and the machine's busy CPU-seconds per actor (from /proc/stat: run it on an idle machine).

    python bench/setup_worker.py [--actors 8] [--repeat 2]

Prints light/Ray ratios (target: below 1). Not a CI gate.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys

ONE_RUN = """
import os, sys, time, ray
from slurm_rl.distributed.worker_env.setup_worker import use_light_setup_worker
use_light_setup_worker()
ray.init(num_cpus=2, include_dashboard=False, logging_level="ERROR")

@ray.remote(num_cpus=0)
class Actor:
    def ping(self):
        return os.getpid()

def busy():
    v = list(map(int, open("/proc/stat").readline().split()[1:]))
    return (sum(v) - v[3] - v[4]) / os.sysconf("SC_CLK_TCK")

ray.get(Actor.remote().ping.remote())  # the node's own start is not measured
n = int(sys.argv[1])
c0, t0 = busy(), time.perf_counter()
for i in range(n):
    a = Actor.options(runtime_env={"env_vars": {"I": str(i)}}).remote()
    ray.get(a.ping.remote())
    ray.kill(a)
print((time.perf_counter() - t0) / n, (busy() - c0) / n)
ray.shutdown()
"""


def one(actors: int, which: str) -> tuple[float, float]:
    env = {**os.environ, "SLURM_RL_RAY_SETUP_WORKER": which}
    out = subprocess.run(
        [sys.executable, "-c", ONE_RUN, str(actors)], env=env, capture_output=True, text=True, check=True
    ).stdout
    wall, cpu = out.split()[-2:]
    return float(wall), float(cpu)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--actors", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()
    runs: dict[str, list[tuple[float, float]]] = {"ray": [], "light": []}
    for _ in range(args.repeat):
        for which in runs:
            runs[which].append(one(args.actors, which))
    med = {w: (statistics.median(r[0] for r in rs), statistics.median(r[1] for r in rs)) for w, rs in runs.items()}
    for w, (wall, cpu) in med.items():
        print(f"{w:5s}: {wall:.2f} s and {cpu:.2f} busy CPU-s per actor")
    print(f"light/ray: wall {med['light'][0] / med['ray'][0]:.2f}, CPU {med['light'][1] / med['ray'][1]:.2f}")


if __name__ == "__main__":
    main()
