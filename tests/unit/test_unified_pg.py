"""One placement group for all bundles (NeMo RL 2026's ``use_unified_pg``): made by the
constructor or by a direct ``_init_placement_groups`` before any worker group uses the cluster,
ranks assigned in the bundles' topology order. A local Ray with 24 logical GPUs (no GPU needed:
the bundles' device ids come from Ray's GPU ids, as on a GPU node)."""

from __future__ import annotations

import pytest
import ray

from slurm_rl.distributed import RayVirtualCluster, RayWorkerGroup
from slurm_rl.distributed.virtual_cluster import get_reordered_bundle, prepare_segment_topology

pytestmark = [pytest.mark.timeout(240), pytest.mark.ray]  # starts a local Ray: `pytest -m unit` skips it


@ray.remote
class RankProbe:
    def where(self) -> tuple[str, str, str, list[int]]:
        import os

        return os.environ["RANK"], os.environ["LOCAL_RANK"], os.environ["NODE_RANK"], ray.get_gpu_ids()


def test_unified_group_ranks_follow_the_bundle_order(many_gpu_ray) -> None:
    cluster = RayVirtualCluster([2, 2], use_gpus=True, num_gpus_per_node=2, use_unified_pg=True, name="uni")
    try:
        pgs = cluster.get_placement_groups()
        assert len(pgs) == 1 and len(pgs[0].bundle_specs) == 4
        order = cluster._sorted_bundle_indices
        assert sorted(order) == [0, 1, 2, 3]  # one node, no topology: by node, then device
        reordered, devices, domains = get_reordered_bundle(pgs[0])
        assert reordered == order and sorted(devices) == devices and domains == ("unknown",) * 4
        group = RayWorkerGroup(cluster, RankProbe, name_prefix="uni")
        seen = ray.get([w.where.remote() for w in group.workers])
        assert [s[:3] for s in seen] == [("0", "0", "0"), ("1", "1", "0"), ("2", "0", "1"), ("3", "1", "1")]
        # worker r sits in bundle order[r]: its GPU is that bundle's device
        assert [s[3][0] for s in seen] == devices
        with pytest.raises(RuntimeError, match="already in use by a worker group"):
            cluster._init_placement_groups(use_unified_pg=False)
        group.shutdown(force=True)
    finally:
        cluster.shutdown()


def test_a_direct_call_switches_the_layout_before_use(many_gpu_ray) -> None:
    cluster = RayVirtualCluster([1, 1], use_gpus=False)  # per node, as the constructor makes it
    try:
        assert len(cluster._init_placement_groups()) == 2 and cluster._sorted_bundle_indices is None
        pgs = cluster._init_placement_groups(strategy=None, use_unified_pg=True)
        assert len(pgs) == 1 and cluster._sorted_bundle_indices == [0, 1]
        assert cluster._init_placement_groups(use_unified_pg=True) is pgs  # made once
        assert prepare_segment_topology(None, 2) == (None, [], {})
        constraints, remaining, topology = prepare_segment_topology(1, 1)  # a node without a domain
        assert constraints is None and remaining == list(topology)
    finally:
        cluster.shutdown()


def test_node_resource_constraints_go_into_every_bundle(many_gpu_ray) -> None:
    with pytest.raises(AssertionError, match=r"node_resource_constraints length \(1\) must match"):
        RayVirtualCluster([1, 1], use_gpus=False, node_resource_constraints=[{"x": 0.001}])
    cluster = RayVirtualCluster([1], use_gpus=False, node_resource_constraints=[{"CPU": 1, "memory": 1}])
    try:
        assert cluster.get_placement_groups()[0].bundle_specs[0]["memory"] == 1
    finally:
        cluster.shutdown()
