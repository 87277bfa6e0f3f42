"""The driver API on an embedded local Ray (8 logical CPUs): virtual cluster, worker groups,
dispatch modes, futures, shutdown, grids."""

from __future__ import annotations

import os
import time

import pytest
import ray

from slurm_rl.distributed import (
    BatchedDataDict,
    RayVirtualCluster,
    RayWorkerBuilder,
    RayWorkerGroup,
    ResourceInsufficientError,
)
from slurm_rl.distributed import virtual_cluster as vc
from slurm_rl.distributed.worker_env.local_start import start_local_ray

pytestmark = [pytest.mark.timeout(240), pytest.mark.ray]  # starts a local Ray: `pytest -m unit` skips it
FQN = "tests.unit.workers.simple.EnvWorker"


@pytest.fixture(scope="module")
def local_ray():
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    os.environ["USER_LEVEL"] = "from-user"  # the user's environment reaches workers (lowest precedence)
    start_local_ray(num_cpus=8, include_dashboard=False, runtime_env={"env_vars": vc.worker_env_vars()})
    yield
    ray.shutdown()


@pytest.fixture
def cluster(local_ray):
    c = RayVirtualCluster([2, 2], use_gpus=False, max_colocated_worker_groups=1, name="t")
    yield c
    c.shutdown()


def test_virtual_cluster_shape(cluster) -> None:
    assert cluster.world_size() == 4 and cluster.node_count() == 2
    assert len(cluster.get_placement_groups()) == 2
    ip, port = cluster.get_master_address_and_port()
    assert not ip.startswith("0.") and 1024 <= port <= 65535
    assert cluster.shutdown() is True and cluster.shutdown() is True  # idempotent
    assert cluster.get_placement_groups() == []


def test_resource_check_retries_with_backoff(local_ray, monkeypatch) -> None:
    sleeps: list[float] = []
    monkeypatch.setattr(time, "sleep", sleeps.append)
    monkeypatch.setenv("NRL_VIRTUAL_CLUSTER_MAX_RETRIES", "3")
    with pytest.raises(ResourceInsufficientError, match="Maximum number of retries"):
        RayVirtualCluster([64], use_gpus=False)
    assert sleeps == [1, 2, 4]  # after every failed attempt, the last included (NeMo RL's semantics)
    monkeypatch.setenv("NRL_VIRTUAL_CLUSTER_MAX_RETRIES", "0")
    with pytest.raises(AssertionError):
        RayVirtualCluster([1], use_gpus=False)
    monkeypatch.setenv("NRL_VIRTUAL_CLUSTER_MAX_RETRIES", "three")
    with pytest.raises(ValueError, match="integer"):
        RayVirtualCluster([1], use_gpus=False)


def test_gpu_request_names_what_is_short(local_ray, monkeypatch) -> None:
    monkeypatch.setenv("NRL_VIRTUAL_CLUSTER_MAX_RETRIES", "1")
    with pytest.raises(ResourceInsufficientError, match="GPU: need 2"):
        RayVirtualCluster([2], use_gpus=True)


def test_group_env_vars_and_metadata(cluster) -> None:
    group = RayWorkerGroup(cluster, RayWorkerBuilder(FQN, tag="t1"), name_prefix="pol")
    try:
        envs = ray.get(group.run_all_workers_single_data("env"))
        assert [e["RANK"] for e in envs] == ["0", "1", "2", "3"]
        assert [e["NODE_RANK"] for e in envs] == ["0", "0", "1", "1"]
        assert [e["LOCAL_RANK"] for e in envs] == ["0", "1", "0", "1"]
        assert {e["WORLD_SIZE"] for e in envs} == {"4"}
        assert {e["MASTER_ADDR"] for e in envs} == {group.master_address}
        assert {e["MASTER_PORT"] for e in envs} == {str(group.master_port)}
        assert {e["USER_LEVEL"] for e in envs} == {"from-user"}
        assert [m["name"] for m in group.worker_metadata] == ["pol-0-0", "pol-0-1", "pol-1-0", "pol-1-1"]
        assert group.group_count == 4 and group.world_size == 4 and group.cluster is cluster
        assert group.tied_workers_groups == [[0], [1], [2], [3]]
        assert ray.get(group.workers[0].init_args.remote()) == ("t1", 0)
    finally:
        assert group.shutdown(cleanup_method="cleanup") is True
    assert group.workers == [] and group.worker_metadata == []


def test_workers_per_node_forms_and_errors(cluster) -> None:
    g = RayWorkerGroup(cluster, RayWorkerBuilder(FQN), workers_per_node=[1, 2], name_prefix="w")
    assert [m["node_idx"] for m in g.worker_metadata] == [0, 1, 1]
    g.shutdown()
    g = RayWorkerGroup(cluster, RayWorkerBuilder(FQN), workers_per_node=1)
    assert g.world_size == 2
    g.shutdown()
    for bad, msg in [([1], "2 nodes"), ([3, 1], "has 2 bundles"), ("2", "None, an int or a list")]:
        with pytest.raises(ValueError, match=msg):
            RayWorkerGroup(cluster, RayWorkerBuilder(FQN), workers_per_node=bad)
    with pytest.raises(ValueError, match="names node 5"):
        RayWorkerGroup(cluster, RayWorkerBuilder(FQN), bundle_indices_list=[(5, [0])])
    with pytest.raises(ValueError, match="cannot import worker class"):
        RayWorkerGroup(cluster, RayWorkerBuilder("tests.unit.workers.simple.Missing"))


def test_dp_leaders_coarser_than_tied_groups(cluster) -> None:
    """NeMo RL 2026's dp_leader_worker_indices: one data-parallel shard made of two tied groups
    (e.g. a context and a generation engine); a leader that is no tied group's first rank is
    refused before any worker starts."""
    tied = [(0, [0]), (0, [1]), (1, [0, 1])]
    refused = r"dp_leader_worker_indices \[1, 3\] must be an ascending subset of the tied group leaders \[0, 1, 2\]"
    with pytest.raises(ValueError, match=refused):
        RayWorkerGroup(cluster, FQN, bundle_indices_list=tied, dp_leader_worker_indices=[1, 3])
    with pytest.raises(ValueError, match=r"dp_leader_worker_indices='0,2': must be a list of worker ranks"):
        RayWorkerGroup(cluster, FQN, bundle_indices_list=tied, dp_leader_worker_indices="0,2")  # type: ignore[arg-type]
    g = RayWorkerGroup(cluster, FQN, bundle_indices_list=tied, dp_leader_worker_indices=[0, 2], name_prefix="pd")
    try:
        assert g.dp_size == 2 and g.get_dp_leader_worker_idx(1) == 2
        with pytest.raises(IndexError, match=r"Valid range is \[0, 1\]"):
            g.get_dp_leader_worker_idx(2)
    finally:
        g.shutdown()


def test_tied_groups_and_only_on_modes(cluster) -> None:
    g = RayWorkerGroup(cluster, RayWorkerBuilder(FQN), bundle_indices_list=[(0, [0, 1]), (1, [0, 1])], name_prefix="tp")
    try:
        assert g.tied_workers_groups == [[0, 1], [2, 3]]
        assert [m["name"] for m in g.worker_metadata] == ["tp-grp0-0", "tp-grp0-1", "tp-grp1-0", "tp-grp1-1"]
        assert [m["bundle_indices"] for m in g.worker_metadata] == [(0, [0, 1]), None, (1, [0, 1]), None]
        assert g.worker_to_tied_group_index == {0: 0, 1: 0, 2: 1, 3: 1}
        assert len(g.run_all_workers_single_data("noop")) == 4
        assert len(g.run_all_workers_single_data("noop", only_on="tied_leader")) == 2
        assert len(g.run_all_workers_single_data("noop", only_on="all_tied_workers")) == 4
        with pytest.raises(ValueError, match="only_on='leaders'"):
            g.run_all_workers_single_data("noop", only_on="leaders")
        with pytest.raises(AttributeError, match="no method 'nope'"):
            g.run_all_workers_single_data("nope")
        data = [BatchedDataDict({"x": [1, 2, 3]}).slice(0, 3), BatchedDataDict({"x": [4]}).slice(0, 1)]
        # leaders: one result per tied group; all tied workers: de-duplicated to one per group
        assert g.get_all_worker_results(g.run_all_workers_multiple_data("size_of", data, only_on="tied_leader")) == [
            3,
            1,
        ]
        fut = g.run_all_workers_multiple_data("size_of", data, only_on="all_tied_workers")
        assert len(fut.futures) == 4 and g.get_all_worker_results(fut) == [3, 1]
        # NeMo RL 2026 (and the docs' example) take it as the list of refs it also is
        assert ray.get(fut) == [3, 3, 1, 1] and isinstance(fut, list) and len(fut) == 4
        # "all": worker i gets data[i]; fewer items warn, more items are an error
        with pytest.warns(UserWarning, match="only the first 2"):
            fut = g.run_all_workers_multiple_data("size_of", data)
        assert g.get_all_worker_results(fut) == [3, 1]
        with pytest.raises(ValueError, match="5 data items"):
            g.run_all_workers_multiple_data("size_of", data * 2 + data[:1])
        with pytest.warns(UserWarning, match="not SlicedDataDict"):
            g.run_all_workers_multiple_data("echo", [1, 2, 3, 4], common_kwargs={"scale": 10})
    finally:
        g.shutdown()


def test_configure_worker_precedence(cluster) -> None:
    g = RayWorkerGroup(cluster, RayWorkerBuilder("tests.unit.workers.simple.ConfiguredWorker", tag="c"))
    try:
        envs = ray.get(g.run_all_workers_single_data("env"))
        assert {e["CONFIGURED"] for e in envs} == {"yes-True"}
        assert ray.get(g.workers[0].init_args.remote()) == ("c", 7)  # init_kwargs merged
    finally:
        g.shutdown()


def test_shutdown_falls_back_to_force_on_timeout(cluster) -> None:
    g = RayWorkerGroup(cluster, RayWorkerBuilder(FQN), workers_per_node=1)
    assert g.shutdown(cleanup_method="slow_cleanup", timeout=0.5) is False
    assert g.workers == []


def test_grids(cluster, capsys) -> None:
    g = RayWorkerGroup(cluster, RayWorkerBuilder(FQN), name_prefix="pol")
    try:
        g.print_worker_layout()
        out = capsys.readouterr().out
        assert "Ray Cluster: 2 nodes, 4 GPUs, Worker Group: pol (4 workers)" in out
        assert "0.0" in out and "1.1" in out and "W3" in out
        cluster.print_all_worker_groups([g])
        out = capsys.readouterr().out
        assert "Ray Cluster Global View: 2 nodes, 4 GPUs, Worker Groups: 1" in out and "G0:W0" in out
        assert "Legend: G0 = pol (4 workers)" in out
    finally:
        g.shutdown()
    from slurm_rl.distributed._engine.cluster_grid import cluster_grid

    assert cluster_grid([0, 0]) == "Empty Ray Cluster (no GPUs)"


def test_worker_in_another_environment_is_imported_there(cluster, tmp_path) -> None:
    """A non-SYSTEM py_executable: the class is imported by name inside that interpreter (here a
    wrapper script around this Python that marks the environment), not in the driver."""
    import sys

    from slurm_rl.distributed import ACTOR_ENVIRONMENT_REGISTRY

    py = tmp_path / "other-python"
    py.write_text(f'#!/bin/sh\nexport OTHER_ENV=1\nexec {sys.executable} "$@"\n')
    py.chmod(0o755)
    fqn = "tests.unit.workers.simple.ConfiguredWorker"
    ACTOR_ENVIRONMENT_REGISTRY[fqn] = str(py)
    try:
        g = RayWorkerGroup(cluster, RayWorkerBuilder(fqn, tag="iso"), workers_per_node=1, name_prefix="iso")
        try:
            assert ray.get(g.workers[0].init_args.remote()) == ("iso", 7)  # configure_worker ran there too
            envs = ray.get(g.run_all_workers_single_data("env"))
            assert [e["RANK"] for e in envs] == ["0", "1"] and {e["CONFIGURED"] for e in envs} == {"yes-True"}
            assert os.environ.get("OTHER_ENV") is None  # the driver is not in that environment...
            assert ray.get(g.run_all_workers_single_data("other_env")) == ["1", "1"]  # ...the workers are
        finally:
            assert g.shutdown() is True
    finally:
        del ACTOR_ENVIRONMENT_REGISTRY[fqn]


def test_get_actor_python_env() -> None:
    from slurm_rl.distributed import ACTOR_ENVIRONMENT_REGISTRY, PY_EXECUTABLES, get_actor_python_env

    ACTOR_ENVIRONMENT_REGISTRY["a.B"] = PY_EXECUTABLES.SYSTEM
    try:
        assert get_actor_python_env("a.B") == PY_EXECUTABLES.SYSTEM
    finally:
        del ACTOR_ENVIRONMENT_REGISTRY["a.B"]
    with pytest.raises(ValueError, match=r"ACTOR_ENVIRONMENT_REGISTRY\['x\.Y'\]"):
        get_actor_python_env("x.Y")
