"""Prints, as one JSON line, what topology-aware placement sees on the job's nodes: each
node's (domain, topo rank), the nodes select_segment_nodes picks for one 2-node segment, a
3-bundle virtual cluster's bundles in topology order, the nodes of a unified placement group's
ranks 0..2 (spread by Ray, ranked by topology), and where a 2-node cluster pinned to one
segment (prepare_segment_topology) lands."""

import json
import socket

import ray

from slurm_rl.distributed import RayVirtualCluster, RayWorkerGroup, init_ray
from slurm_rl.distributed.virtual_cluster import (
    get_ray_cluster_topology,
    prepare_segment_topology,
    select_segment_nodes,
)


@ray.remote
class Where:
    def host(self) -> tuple[str, str]:
        import os

        return os.environ["RANK"], socket.gethostname()


init_ray()
topology = get_ray_cluster_topology()
names = {n["NodeID"]: n["NodeManagerHostname"] for n in ray.nodes() if n["Alive"]}
selected, _ = select_segment_nodes(topology, segment_size=2, num_nodes=2)
cluster = RayVirtualCluster([1, 1, 1], use_gpus=False, max_colocated_worker_groups=1)
order = cluster._sorted_bundle_indices
cluster.shutdown()

unified = RayVirtualCluster([1, 1, 1], use_gpus=False, placement_group_strategy="STRICT_SPREAD", use_unified_pg=True)
group = RayWorkerGroup(unified, Where, name_prefix="unified")
ranks = dict(ray.get([w.host.remote() for w in group.workers]))
group.shutdown(force=True)
unified.shutdown()

constraints, remaining, _ = prepare_segment_topology(2, 2, role="training")
pinned = RayVirtualCluster([1, 1], use_gpus=False, node_resource_constraints=constraints)
group = RayWorkerGroup(pinned, Where, name_prefix="pinned")
pinned_hosts = sorted(h for _, h in ray.get([w.host.remote() for w in group.workers]))
group.shutdown(force=True)
pinned.shutdown()
print(
    json.dumps(
        {
            "topology": {names[k]: list(v) for k, v in topology.items()},
            "segment": sorted(names[k] for k in selected),
            "sorted_bundles": order,
            "unified_ranks": [ranks[str(r)] for r in range(3)],
            "constraints": constraints,
            "remaining": sorted(names[k] for k in remaining),
            "pinned_hosts": pinned_hosts,
        }
    ),
    flush=True,
)
