"""A virtual cluster larger than its job: two GPU bundles of one CPU each on one node, in a
job submitted with --cpus-per-node 1. Prints how long the constructor took to fail, then lets
its error end the driver as a user's would."""

import time

from slurm_rl.distributed import RayVirtualCluster, init_ray

init_ray()
started = time.monotonic()
try:
    RayVirtualCluster([2], use_gpus=True)
except Exception:
    print(f"RayVirtualCluster failed after {time.monotonic() - started:.1f} s", flush=True)
    raise
