"""Topology-aware placement: the order bundles get ranks in, whole segments of a domain, and
what a node tells Ray of its place in SLURM's switch tree."""

from __future__ import annotations

import pytest

from slurm_rl.core.job_env import JobEnvironment
from slurm_rl.distributed.virtual_cluster import (
    NVLINK_DOMAIN_UNKNOWN,
    TOPO_RANK_UNKNOWN,
    ResourceInsufficientError,
    _parse_topology_from_resources,
    _sort_bundle_indices_by_topology,
    select_segment_nodes,
)
from slurm_rl.job.node_topology import topology_resources

pytestmark = pytest.mark.unit
U, R = NVLINK_DOMAIN_UNKNOWN, TOPO_RANK_UNKNOWN


def test_without_topology_bundles_go_by_node_then_device() -> None:
    data = [(1, U, R, "n2"), (0, U, R, "n2"), (0, U, R, "n1")]
    assert _sort_bundle_indices_by_topology(data) == [2, 1, 0]
    assert _sort_bundle_indices_by_topology([]) == []


def test_domains_by_their_lowest_rank_then_rank_node_device() -> None:
    data = [(0, "leaf2", 3, "n3"), (1, "leaf1", 2, "n2"), (0, "leaf1", 2, "n2"), (0, "leaf1", 1, "n1")]
    assert _sort_bundle_indices_by_topology(data) == [3, 2, 1, 0]


def test_only_whole_segments_of_a_domain_are_kept() -> None:
    data = [(g, "leaf1", r, f"n{r}") for r in (1, 2, 3) for g in (0, 1)]  # 3 nodes x 2 devices
    assert len(_sort_bundle_indices_by_topology(data, segment_size=2, gpus_per_node=2)) == 4
    with pytest.raises(ValueError, match="gpus_per_node is required"):
        _sort_bundle_indices_by_topology(data, segment_size=2)


def test_segments_come_from_whole_domains_lowest_ranks_first() -> None:
    topo = {"n1": ("leaf1", 1), "n2": ("leaf1", 2), "n3": ("leaf2", 3), "n4": ("leaf2", 4), "n5": ("leaf3", 5)}
    assert select_segment_nodes(topo, 2, 4) == (["n1", "n2", "n3", "n4"], ["n5"])
    topo["n0"] = (U, R)  # a node of no known domain (a GPU-less head) is never chosen
    assert select_segment_nodes(topo, 2, 2) == (["n1", "n2"], ["n3", "n4", "n5", "n0"])
    with pytest.raises(ValueError, match="must be divisible by"):
        select_segment_nodes(topo, 2, 3)
    with pytest.raises(ResourceInsufficientError, match="Cannot form 3 segment"):
        select_segment_nodes(topo, 2, 6)  # leaf3 has one node: no third segment


def test_a_node_reads_its_leaf_switch_from_slurm() -> None:
    env = JobEnvironment.current(
        {"SLURM_TOPOLOGY_ADDR": "spine.leaf2.node3", "SLURM_TOPOLOGY_ADDR_PATTERN": "switch.switch.node"}
    )
    resources, note = topology_resources(env.leaf_switch(), 2, env.topology_addr)
    assert resources == {"nvlink_domain_leaf2": 1.0, "topo_rank": 3.0}
    assert _parse_topology_from_resources(resources) == ("nvlink_domain_leaf2", 3) and "domain leaf2" in note
    bare = JobEnvironment.current({"SLURM_TOPOLOGY_ADDR": "node3", "SLURM_TOPOLOGY_ADDR_PATTERN": "node"})
    resources, note = topology_resources(bare.leaf_switch(), 0, bare.topology_addr)
    assert resources == {"topo_rank": 1.0} and _parse_topology_from_resources(resources) == (U, 1)
    assert "no switch" in note
    # topology/block (23.11+): the block is the domain
    block = JobEnvironment.current({"SLURM_TOPOLOGY_ADDR": "b2.node3", "SLURM_TOPOLOGY_ADDR_PATTERN": "block.node"})
    resources, note = topology_resources(block.leaf_switch(), 2, block.topology_addr)
    assert resources == {"nvlink_domain_b2": 1.0, "topo_rank": 3.0}
    assert note == "topology: domain b2 (the switch or block over it in b2.node3), topo rank 3"
