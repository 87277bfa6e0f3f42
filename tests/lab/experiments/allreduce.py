"""A worker group over every node of the job; a gloo all-reduce across it gives the right sum."""

import json
import sys

import ray

from slurm_rl.distributed import RayVirtualCluster, RayWorkerBuilder, RayWorkerGroup, init_ray


def main() -> int:
    init_ray()
    nodes = len([n for n in ray.nodes() if n["Alive"]])
    # A bundle of 2 CPUs fills a lab node (2 CPUs), so the three placement groups land on three nodes,
    # as full-node bundles do on a GPU cluster; the workers take 1 CPU of it.
    cluster = RayVirtualCluster([1] * nodes, use_gpus=False, max_colocated_worker_groups=2, name="allreduce")
    group = RayWorkerGroup(cluster, RayWorkerBuilder("gloo_worker.GlooWorker"), name_prefix="gloo")
    group.print_worker_layout()
    results = ray.get(
        [w.allreduce.remote(float(m["global_rank"] + 1)) for w, m in zip(group.workers, group.worker_metadata)]
    )
    print("REPORT " + json.dumps(results), flush=True)
    print("RAY_NODES " + json.dumps(sorted(n["NodeManagerAddress"] for n in ray.nodes() if n["Alive"])), flush=True)
    expected = nodes * (nodes + 1) / 2
    ok = (
        all(r["sum"] == expected for r in results)
        and len({r["ip"] for r in results}) == nodes
        and sorted(r["node_rank"] for r in results) == list(range(nodes))
    )
    group.shutdown()
    cluster.shutdown()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
