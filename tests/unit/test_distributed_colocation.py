"""Colocation with fractional GPUs and the bounded placement-group wait, on a local Ray that
declares 2 logical GPUs (no GPU is needed: Ray only accounts for them)."""

from __future__ import annotations

import pytest
import ray

from slurm_rl.distributed import RayVirtualCluster, RayWorkerBuilder, RayWorkerGroup
from slurm_rl.distributed import virtual_cluster as vc
from tests.unit.conftest import local_ray

pytestmark = [pytest.mark.timeout(240), pytest.mark.ray]  # starts a local Ray: `pytest -m unit` skips it
FQN = "tests.unit.workers.simple.EnvWorker"


@pytest.fixture(scope="module")
def gpu_ray():
    with local_ray(num_cpus=8, num_gpus=2):
        yield


def test_two_groups_share_gpus_when_colocated(gpu_ray) -> None:
    cluster = RayVirtualCluster([2], use_gpus=True, max_colocated_worker_groups=2, name="coloc")
    try:
        policy = RayWorkerGroup(cluster, RayWorkerBuilder(FQN), name_prefix="policy")
        gen = RayWorkerGroup(cluster, RayWorkerBuilder(FQN), name_prefix="generation")
        assert policy.world_size == gen.world_size == 2
        # each worker holds half a GPU, so both groups fit on the same two GPUs
        ids_p = ray.get([w.__ray_call__.remote(lambda self: ray.get_gpu_ids()) for w in policy.workers])
        ids_g = ray.get([w.__ray_call__.remote(lambda self: ray.get_gpu_ids()) for w in gen.workers])
        assert sorted(map(tuple, ids_p)) == sorted(map(tuple, ids_g))
        assert {len(i) for i in ids_p} == {1}
        assert ray.available_resources().get("GPU", 0) == 0
        cluster.print_all_worker_groups([policy, gen])
        policy.shutdown()
        gen.shutdown()
    finally:
        cluster.shutdown()


def test_placement_group_wait_is_bounded_and_cleans_up(gpu_ray, monkeypatch) -> None:
    monkeypatch.setattr(vc, "PLACEMENT_GROUP_TIMEOUT_S", 2.0)
    first = RayVirtualCluster([8], use_gpus=False)  # holds every CPU
    try:
        before = len(ray.util.placement_group_table())
        with pytest.raises(TimeoutError, match="may lack resources"):
            # passes the totals check (8 CPUs exist) but can never be placed while `first` lives
            RayVirtualCluster([8], use_gpus=False, placement_group_strategy="STRICT_PACK")
        removed = [t for t in ray.util.placement_group_table().values() if t["state"] == "REMOVED"]
        assert len(ray.util.placement_group_table()) == before + 1 and len(removed) >= 1
    finally:
        first.shutdown()
