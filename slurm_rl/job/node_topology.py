"""A node's place in the cluster's topology, as Ray resources for topology-aware placement
(``distributed/_engine/topology.py``, NeMo RL 2026's ``nvlink_domain_*`` / ``topo_rank``).

The domain is the leaf switch SLURM's ``topology/tree`` puts the node under, or its block under
``topology/block`` (23.11+, the NVLink domains of NVL72-style racks; ``--segment``), from its
``SLURM_TOPOLOGY_ADDR``: nodes in one domain talk fastest, as GPUs of one NVLink domain do.
A GPU's own NVLink domain (a multi-node NVLink fabric) needs a GPU to probe and is not read
here. The rank is the node's place in the job, head first (1..N).
"""

from __future__ import annotations

from ..distributed._engine.node_address import NVLINK_DOMAIN_PREFIX, TOPO_RANK_KEY


def topology_resources(leaf_switch: str | None, rank: int, address: str) -> tuple[dict[str, float], str]:
    """(Ray resources, a line for the node log) of a node of rank ``rank`` under ``leaf_switch``."""
    resources: dict[str, float] = {TOPO_RANK_KEY: float(rank + 1)}
    if not leaf_switch:
        return resources, (
            f"topology: SLURM gives no switch for this node (no topology/tree plugin); topo rank {rank + 1}, "
            f"domain unknown: topology-aware placement orders nodes by rank only"
        )
    resources[f"{NVLINK_DOMAIN_PREFIX}{leaf_switch}"] = 1.0
    return resources, f"topology: domain {leaf_switch} (the switch or block over it in {address}), topo rank {rank + 1}"
