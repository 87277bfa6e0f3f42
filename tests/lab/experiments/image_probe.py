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
    return {"host": host, "before": before, "after": PROBE.read_text(), "squashfuse": root_is_the_mounted_image()}


def root_is_the_mounted_image() -> bool:
    """Whether "/" is enroot's start from a squashfs: its squashfuse mount of the image (not
    visible in here) as the lower layer of an overlay, kernel overlayfs with lowerdir .../overlay/lower
    or fuse-overlayfs. An unpacked container's "/" is its directory in enroot's data path instead."""
    with open("/proc/self/mountinfo") as f:  # fields: ... mount point (5th) ... " - " type source options
        roots = [line.split(" - ", 1)[1].split() for line in f if line.split()[4] == "/" and " - " in line]
    fstype, _source, options = (roots[-1] + ["", "", ""])[:3]  # the last "/" is the one on top
    return fstype == "fuse.fuse-overlayfs" or (fstype == "overlay" and "/overlay/lower," in options + ",")


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
