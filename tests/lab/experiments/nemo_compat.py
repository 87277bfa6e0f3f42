"""Driver: NeMo RL-style worker classes on every node of the job. Writes nemo_compat.json into
the job dir: per group, each worker's host, rank and what it sees.

    nemo_compat.py REPO   (REPO: the checkout, so workers import tests.unit.workers.nemo_style)
"""

import json
import os
import sys
from pathlib import Path

repo = sys.argv[1]
sys.path.insert(0, repo)
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [repo, os.environ.get("PYTHONPATH")]))

import ray  # noqa: E402

from slurm_rl.distributed import (  # noqa: E402
    ACTOR_ENVIRONMENT_REGISTRY,
    RayVirtualCluster,
    RayWorkerBuilder,
    RayWorkerGroup,
    init_ray,
)
from tests.unit.workers.nemo_style import DecoratedWithOptions, DecoratedWorker  # noqa: E402

W = "tests.unit.workers.nemo_style"
job_dir = Path(os.environ["SLURM_RL_JOB_DIR"])


def run(group: RayWorkerGroup, *calls: tuple) -> list[list]:  # type: ignore[type-arg]
    try:
        return [ray.get(group.run_all_workers_single_data(*c)) for c in calls]
    finally:
        group.shutdown()


init_ray()
nodes = len([n for n in ray.nodes() if n["Alive"]])
# A bundle of 2 CPUs fills a lab node (2 CPUs), so the three placement groups land on three nodes,
# as full-node bundles do on a GPU cluster; the workers take 1 CPU of it.
cluster = RayVirtualCluster([1] * nodes, use_gpus=False, max_colocated_worker_groups=2, name="compat")
out = {
    "decorated": run(RayWorkerGroup(cluster, DecoratedWorker, name_prefix="dec"), ("rank",), ("host",)),
    "decorated_options": run(
        RayWorkerGroup(cluster, RayWorkerBuilder(DecoratedWithOptions), name_prefix="opt"),
        ("env", "FROM_DECORATOR"),
        ("env", "LAYER"),
        ("get_tag",),
    ),
    "system_env": run(
        RayWorkerGroup(cluster, f"{W}.LauncherEnvWorker", name_prefix="sys"), ("host",), ("launcher_vars",)
    ),
}
# An isolated environment: an interpreter wrapper (on the shared FS) that sets launcher-like
# variables of its own; the decorated class is imported by name there, not in the driver.
wrapper = job_dir / "isolated-python"
wrapper.write_text(f'#!/bin/sh\nexport PMIX_RANK=9 MPI_LOCALRANKID=9 ISOLATED=1\nexec {sys.executable} "$@"\n')
wrapper.chmod(0o755)
ACTOR_ENVIRONMENT_REGISTRY[f"{W}.LauncherEnvWorker"] = str(wrapper)
ACTOR_ENVIRONMENT_REGISTRY[f"{W}.DecoratedWorker"] = str(wrapper)
iso = RayWorkerGroup(cluster, f"{W}.LauncherEnvWorker", name_prefix="iso")
# the per-node initializers: one actor per node, on that node, in the isolated Python
out["isolated_initializers"] = {
    str(node): ray.get(init.__ray_call__.remote(lambda self: (os.uname().nodename, os.environ.get("ISOLATED"))))
    for node, init in sorted(iso._initializer_pool.items())
}
out["isolated_env"] = run(iso, ("host",), ("launcher_vars",))
out["isolated_pool_after_shutdown"] = len(iso._initializer_pool)
out["isolated_decorated"] = run(
    RayWorkerGroup(cluster, f"{W}.DecoratedWorker", name_prefix="isodec"), ("rank",), ("env", "ISOLATED")
)
cluster.shutdown()
(job_dir / "nemo_compat.json").write_text(json.dumps(out))
print("ok", json.dumps(out))
