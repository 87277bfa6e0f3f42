"""Topology-aware placement, NeMo RL 2026's names: which nodes a group of workers takes so that
ranks that talk most share a fast domain, and in which order its bundles get ranks.

Every node of a slurm-rl job carries two Ray resources from SLURM's topology (``job/node_topology.py``):
``nvlink_domain_<domain>`` (the node's NVLink domain where a GPU probe knows it, else the leaf
switch SLURM's ``topology/tree`` puts it under) and ``topo_rank`` (its place in the allocation,
1..N, head first). Without topology every node is ``unknown`` / -1 and the order falls back to
node id then device. Pure functions here; the virtual cluster reads the nodes' resources.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from .errors import ResourceInsufficientError
from .node_address import NVLINK_DOMAIN_PREFIX, NVLINK_DOMAIN_UNKNOWN, TOPO_RANK_KEY, TOPO_RANK_UNKNOWN

BundleInfo = tuple[int, str, int, str]  # (device index on its node, domain, topo rank, node id)


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


def prepare_segment_topology(
    segment_size: int | None,
    num_nodes: int,
    *,
    topology: Mapping[str, tuple[str, int]] | None = None,
    role: str = "training",
) -> tuple[list[dict[str, float]] | None, list[str], dict[str, tuple[str, int]]]:
    """Per-node constraints that pin a cluster of ``num_nodes`` nodes to whole segments.

    Returns ``(node_resource_constraints, remaining_node_ids, topology)``: the constraints
    (``[{"nvlink_domain_X": 0.001}, ...]``, one per node, for ``RayVirtualCluster``) or None
    without ``segment_size`` or without any known domain (then every node remains); the nodes
    not selected (hand their sub-topology to the next call, e.g. for inference); the topology
    used (``{}`` without ``segment_size``)."""
    import logging

    log = logging.getLogger(__name__)
    if segment_size is None:
        return None, [], {}
    topo = dict(get_ray_cluster_topology() if topology is None else topology)
    if all(domain == NVLINK_DOMAIN_UNKNOWN for domain, _ in topo.values()):
        log.warning(
            "segment_size=%s for %s: no node knows its NVLink domain or switch; nodes are placed unordered",
            segment_size,
            role,
        )
        return None, list(topo), topo
    selected, remaining = select_segment_nodes(topo, segment_size, num_nodes)
    log.info(
        "%s: %d nodes in %d domain(s), segments of %d",
        role,
        num_nodes,
        len({topo[n][0] for n in selected}),
        segment_size,
    )
    return [{topo[n][0]: 0.001} for n in selected], remaining, topo


def _bundle_device() -> int:
    """The first GPU Ray gave this task (run in a bundle to learn its device)."""
    import ray

    return int(ray.get_gpu_ids()[0])


def get_reordered_bundle(
    pg: Any, segment_size: int | None = None, gpus_per_node: int | None = None
) -> tuple[list[int], list[int], tuple[str, ...]]:
    """A placement group's bundles in rank order by topology.

    Returns ``(bundle indices in order, their device ids in that order, each bundle's domain by
    original index)``. A bundle's node and domain come from the placement group table and the
    nodes' resources; its device from a tiny task in the bundle where bundles hold GPUs (else
    its position among the group's bundles on that node)."""
    import ray
    from ray.util.placement_group import placement_group_table
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    placed = placement_group_table(pg)["bundles_to_node_id"]
    specs = pg.bundle_specs
    topology = get_ray_cluster_topology()
    nodes = [str(placed[i]) for i in range(len(specs))]
    if all(spec.get("GPU", 0) > 0 for spec in specs):
        probe = ray.remote(_bundle_device)
        devices = ray.get(
            [
                probe.options(
                    num_cpus=0,
                    num_gpus=0.01,  # fits beside workers already holding the bundle
                    scheduling_strategy=PlacementGroupSchedulingStrategy(
                        placement_group=pg, placement_group_bundle_index=i
                    ),
                ).remote()
                for i in range(len(specs))
            ]
        )
    else:
        seen: dict[str, int] = defaultdict(int)
        devices = []
        for node in nodes:
            devices.append(seen[node])
            seen[node] += 1
    data = [
        (devices[i], *topology.get(nodes[i], (NVLINK_DOMAIN_UNKNOWN, TOPO_RANK_UNKNOWN)), nodes[i])
        for i in range(len(specs))
    ]
    order = _sort_bundle_indices_by_topology(data, segment_size=segment_size, gpus_per_node=gpus_per_node)
    return order, [devices[i] for i in order], tuple(d[1] for d in data)


__all__ = [
    "ResourceInsufficientError",
    "_parse_topology_from_resources",
    "_sort_bundle_indices_by_topology",
    "get_ray_cluster_topology",
    "get_reordered_bundle",
    "on_part",
    "prepare_segment_topology",
    "select_segment_nodes",
]


def on_part(
    part: str | None, counts: list[int], constraints: list[dict[str, float]] | None
) -> list[dict[str, float]] | None:
    """``RayVirtualCluster(part=NAME)``: every bundle also asks for a sliver of the resource
    ``part:NAME``, which only that part's nodes carry (a job of parts, core/parts.py)."""
    if part is None:
        return constraints
    from ...core.parts import PART_RESOURCE_PREFIX

    sliver = {f"{PART_RESOURCE_PREFIX}{part}": 0.001}
    return [{**(constraints[i] if constraints else {}), **sliver} for i in range(len(counts))]
