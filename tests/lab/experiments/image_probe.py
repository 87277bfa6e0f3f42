"""A container job's writes into its own root filesystem, on every node: one Ray task per node
writes TAG into /srl-image-probe and reports what was there before it; then, once every job named
in WAIT_FOR has written on that node too (files in BARRIER), what is there now.

argv: TAG BARRIER [WAIT_FOR ...]. Prints one JSON line {"probe": [{host, before, after,
squashfuse}, ...]}: squashfuse, whether the container's filesystem is mounted from the image's
squashfs (Pyxis' use_squashfuse=1 without the cache) rather than unpacked.
"""

import json
import os
import sys
import time
from pathlib import Path

import ray

from slurm_rl.distributed import init_ray

PROBE = Path("/srl-image-probe")


@ray.remote(num_cpus=0)
def probe(tag: str, barrier: str, wait_for: list[str]) -> dict:
    host = os.uname().nodename
    before = PROBE.read_text() if PROBE.exists() else None
    PROBE.write_text(tag)
    Path(barrier, f"{tag}-{host}").touch()
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and not all(Path(barrier, f"{o}-{host}").exists() for o in wait_for):
        time.sleep(0.2)
    with open("/proc/self/mountinfo") as f:  # after " - ": the filesystem type and its source
        mounts = [line.split(" - ", 1)[1].split()[:2] for line in f if " - " in line]
    squashfuse = any("squashfuse" in field for mount in mounts for field in mount)
    return {"host": host, "before": before, "after": PROBE.read_text(), "squashfuse": squashfuse}


def main() -> int:
    tag, barrier, wait_for = sys.argv[1], sys.argv[2], sys.argv[3:]
    init_ray()
    strategy = ray.util.scheduling_strategies.NodeAffinitySchedulingStrategy
    nodes = [n for n in ray.nodes() if n["Alive"]]
    refs = [
        probe.options(scheduling_strategy=strategy(n["NodeID"], soft=False)).remote(tag, barrier, wait_for)
        for n in nodes
    ]
    print(json.dumps({"probe": sorted(ray.get(refs), key=lambda r: r["host"])}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
