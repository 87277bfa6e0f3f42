"""Topology-aware placement, NeMo RL 2026's names: which nodes a group of workers takes so that
ranks that talk most share a fast domain, and in which order its bundles get ranks.

Every node of a slurm-rl job carries two Ray resources from SLURM's topology (``job/topology.py``):
``nvlink_domain_<domain>`` (the node's NVLink domain where a GPU probe knows it, else the leaf
switch SLURM's ``topology/tree`` puts it under) and ``topo_rank`` (its place in the allocation,
1..N, head first). Without topology every node is ``unknown`` / -1 and the order falls back to
node id then device. Pure functions here; the virtual cluster reads the nodes' resources.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence

from .node_address import NVLINK_DOMAIN_PREFIX, NVLINK_DOMAIN_UNKNOWN, TOPO_RANK_KEY, TOPO_RANK_UNKNOWN

BundleInfo = tuple[int, str, int, str]  # (device index on its node, domain, topo rank, node id)


class ResourceInsufficientError(Exception):
    """The Ray cluster lacks what a virtual cluster (or a topology segment) needs."""


def _parse_topology_from_resources(resources: Mapping[str, float]) -> tuple[str, int]:
    """(domain, topo rank) of a node from its Ray resources: the domain is the whole resource
    name (``nvlink_domain_leaf1``), as NeMo RL keeps it; ``unknown`` / -1 where it has none."""
    domains = sorted(k for k in resources if k.startswith(NVLINK_DOMAIN_PREFIX))
    rank = resources.get(TOPO_RANK_KEY)
    return (domains[0] if domains else NVLINK_DOMAIN_UNKNOWN, int(rank) if rank is not None else TOPO_RANK_UNKNOWN)


def get_ray_cluster_topology() -> dict[str, tuple[str, int]]:
    """Every live Ray node's id -> (domain, topo rank)."""
    import ray

    return {n["NodeID"]: _parse_topology_from_resources(n.get("Resources", {})) for n in ray.nodes() if n.get("Alive")}


def _domain_order(nodes: Mapping[str, tuple[str, int]]) -> list[str]:
    """Domains by their lowest topo rank, then name."""
    lowest: dict[str, int] = {}
    for domain, rank in nodes.values():
        lowest[domain] = min(rank, lowest.get(domain, rank))
    return sorted(lowest, key=lambda d: (lowest[d], d))


def _sort_bundle_indices_by_topology(
    bundle_data: Sequence[BundleInfo], segment_size: int | None = None, gpus_per_node: int | None = None
) -> list[int]:
    """Bundle indices in rank order: domain by domain (lowest topo rank first), within a domain
    by topo rank, node and device. With ``segment_size`` (nodes per segment) only whole segments
    of each domain are kept: a domain of 10 nodes gives 8 to segments of 8. Without any topology
    the order is by node id, then device."""
    if segment_size is not None and gpus_per_node is None:
        raise ValueError("gpus_per_node is required with segment_size (to count a segment's bundles)")
    indexed = list(enumerate(bundle_data))
    has_topology = any(d != NVLINK_DOMAIN_UNKNOWN or r != TOPO_RANK_UNKNOWN for _, (_, d, r, _) in indexed)
    if not has_topology:
        return [i for i, (gpu, _, _, node) in sorted(indexed, key=lambda x: (x[1][3], x[1][0], x[0]))]
    nodes = {node: (domain, rank) for _, (_, domain, rank, node) in indexed}
    by_domain: dict[str, list[tuple[int, BundleInfo]]] = defaultdict(list)
    for i, info in indexed:
        by_domain[info[1]].append((i, info))
    out: list[int] = []
    for domain in _domain_order(nodes):
        members = sorted(by_domain[domain], key=lambda x: (x[1][2], x[1][3], x[1][0], x[0]))
        if segment_size is not None and gpus_per_node is not None:
            node_count = len({info[3] for _, info in members})
            members = members[: (node_count // segment_size) * segment_size * gpus_per_node]
        out += [i for i, _ in members]
    return out


def select_segment_nodes(
    topology: Mapping[str, tuple[str, int]], segment_size: int, num_nodes: int
) -> tuple[list[str], list[str]]:
    """``num_nodes`` nodes as whole segments of ``segment_size`` nodes, each segment inside one
    domain, domains with the lowest topo ranks first; returns (selected, every other node).
    Nodes of no known domain are never selected (a constraint on "unknown" could not be met)."""
    if segment_size < 1 or num_nodes % segment_size:
        raise ValueError(f"num_nodes ({num_nodes}) must be divisible by segment_size ({segment_size})")
    need = num_nodes // segment_size
    known = {n: t for n, t in topology.items() if t[0] != NVLINK_DOMAIN_UNKNOWN}
    selected: list[str] = []
    for domain in _domain_order(known):
        if need == 0:
            break
        members = sorted((n for n, t in known.items() if t[0] == domain), key=lambda n: (known[n][1], n))
        take = min(len(members) // segment_size, need)
        selected += members[: take * segment_size]
        need -= take
    if need:
        sizes = ", ".join(f"{d}: {sum(1 for t in known.values() if t[0] == d)}" for d in _domain_order(known))
        raise ResourceInsufficientError(
            f"Cannot form {num_nodes // segment_size} segment(s) of {segment_size} nodes in one domain each "
            f"(nodes per domain: {sizes or 'no node has a known domain'})"
        )
    chosen = set(selected)
    return selected, [n for n in topology if n not in chosen]
