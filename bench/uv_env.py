"""Creating 8 workers in a uv environment (cold, then warm) vs the SYSTEM environment, in one
run on an embedded local Ray. The environment is built offline from an empty requirements file:
what is measured is the per-node build and its reuse, not a download.

    python bench/uv_env.py [--repeat 4]

Target: warm (the environment already built on the node) within 1.2x of SYSTEM. Not a CI gate.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import ray

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from slurm_rl.distributed import ACTOR_ENVIRONMENT_REGISTRY, RayVirtualCluster, RayWorkerGroup

N = 8
UV = "bare_worker.BareUv"
SYSTEM = "bare_worker.Bare"


def create(cluster: RayVirtualCluster, fqn: str) -> float:
    t0 = time.perf_counter()
    group = RayWorkerGroup(cluster, fqn, name_prefix="b")
    took = time.perf_counter() - t0
    group.shutdown()
    return took


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=4)
    args = ap.parse_args()
    requirements = Path(tempfile.mkdtemp()) / "requirements.txt"
    requirements.write_text("")
    ACTOR_ENVIRONMENT_REGISTRY[UV] = f"uv run --offline --with-requirements {requirements}"
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    ray.init(num_cpus=N, include_dashboard=False, runtime_env={"env_vars": {"PYTHONPATH": str(HERE)}})
    cluster = RayVirtualCluster([N], use_gpus=False)
    create(cluster, SYSTEM)  # warm Ray itself (worker processes, class exports) for both sides
    cold = create(cluster, UV)
    warm, system = [], []
    for i in range(args.repeat):
        for fqn in (UV, SYSTEM) if i % 2 == 0 else (SYSTEM, UV):
            (warm if fqn == UV else system).append(create(cluster, fqn))
    w, s = statistics.median(warm), statistics.median(system)
    print(
        f"create {N} workers: uv env cold {cold:.2f}s, warm {w:.2f}s; SYSTEM {s:.2f}s "
        f"-> warm/SYSTEM {w / s:.2f}x (target <= 1.2)"
    )
    cluster.shutdown()
    ray.shutdown()


if __name__ == "__main__":
    main()
