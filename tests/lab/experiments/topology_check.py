"""Prints, as one JSON line, what topology-aware placement sees on the job's nodes: each
node's (domain, topo rank), the nodes select_segment_nodes picks for one 2-node segment, and a
3-bundle virtual cluster's bundles in topology order (with their nodes' domains)."""

import json

import ray

from slurm_rl.distributed import RayVirtualCluster, init_ray
from slurm_rl.distributed.virtual_cluster import get_ray_cluster_topology, select_segment_nodes

init_ray()
topology = get_ray_cluster_topology()
names = {n["NodeID"]: n["NodeManagerHostname"] for n in ray.nodes() if n["Alive"]}
selected, _ = select_segment_nodes(topology, segment_size=2, num_nodes=2)
cluster = RayVirtualCluster([1, 1, 1], use_gpus=False, max_colocated_worker_groups=1)
order = cluster._sorted_bundle_indices
print(
    json.dumps(
        {
            "topology": {names[k]: list(v) for k, v in topology.items()},
            "segment": sorted(names[k] for k in selected),
            "sorted_bundles": order,
        }
    ),
    flush=True,
)
cluster.shutdown()
