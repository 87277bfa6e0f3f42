"""The per-node worker initializer (NeMo RL 2026's IsolatedWorkerInitializer pool): one per node
of a group, the driver itself for workers in its own Python, an actor in the workers' Python
(on their node) for any other; emptied by shutdown, replaced when it died."""

from __future__ import annotations

import sys
import time

import pytest
import ray

from slurm_rl.distributed import ACTOR_ENVIRONMENT_REGISTRY, RayVirtualCluster, RayWorkerBuilder, RayWorkerGroup
from slurm_rl.distributed._engine.initializer import WorkerInitializer, alive, configure
from tests.unit.conftest import local_ray

pytestmark = [pytest.mark.timeout(240), pytest.mark.ray]
FQN = "tests.unit.workers.simple.TopologyConfiguredWorker"


def killed(actor, timeout_s: float = 20.0) -> bool:
    """True once the actor is dead (ray.kill is asynchronous: wait for it, bounded)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not alive(actor, timeout_s=2):
            return True
        time.sleep(0.1)
    return False


@pytest.fixture(scope="module")
def six_cpus():
    with local_ray(num_cpus=6):
        yield


@pytest.fixture
def two_nodes(six_cpus):
    """Two placement groups of two bundles: two logical nodes (on one local Ray)."""
    c = RayVirtualCluster([2, 2], use_gpus=False, num_gpus_per_node=4, name="init")
    yield c
    c.shutdown()


@pytest.fixture
def other_python(tmp_path):
    """An interpreter wrapper that marks its environment (OTHER_ENV=1): workers registered to it
    are imported and configured there, never in the driver."""
    py = tmp_path / "other-python"
    py.write_text(f'#!/bin/sh\nexport OTHER_ENV=1\nexec {sys.executable} "$@"\n')
    py.chmod(0o755)
    ACTOR_ENVIRONMENT_REGISTRY[FQN] = str(py)
    yield str(py)
    del ACTOR_ENVIRONMENT_REGISTRY[FQN]


def test_driver_python_groups_pool_the_driver_per_node(two_nodes) -> None:
    g = RayWorkerGroup(two_nodes, FQN, name_prefix="sys")
    try:
        assert len(g.workers) == 4 and sorted(g._initializer_pool) == [0, 1]  # per node, not per worker
        assert all(isinstance(i, WorkerInitializer) for i in g._initializer_pool.values())  # no extra process
        # configure_worker of 2026 is told the cluster's GPUs per node; it ran in the driver's Python
        assert ray.get(g.run_all_workers_single_data("python_env")) == [("unset", "per-node-4")] * 4
        assert g.py_executable == sys.executable
    finally:
        assert g.shutdown(force=True) is True
    assert g._initializer_pool == {} and g.workers == []


def test_another_python_gets_one_initializer_actor_per_node(two_nodes, other_python) -> None:
    g = RayWorkerGroup(two_nodes, RayWorkerBuilder(FQN, tag="iso"), name_prefix="iso")
    try:
        pool = dict(g._initializer_pool)
        assert sorted(pool) == [0, 1] and all(isinstance(i, ray.actor.ActorHandle) for i in pool.values())
        assert all(isinstance(w, ray.actor.ActorHandle) for w in g.workers)  # real handles, not proxies
        assert ray.get(g.run_all_workers_single_data("python_env")) == [("1", "per-node-4")] * 4  # configured there
        assert ray.get(g.workers[0].init_args.remote()) == ("iso", 0)
        assert g.py_executable == other_python
    finally:
        assert g.shutdown(force=True) is True
    assert g._initializer_pool == {}
    assert all(killed(i) for i in pool.values())  # the initializers went with the group


@pytest.mark.parametrize("python", ["driver", "other"])
def test_a_dead_worker_shutdown_reports_it_and_the_cluster_takes_a_new_group(two_nodes, python, request) -> None:
    if python == "other":
        request.getfixturevalue("other_python")
    g = RayWorkerGroup(two_nodes, FQN, name_prefix="dead")
    ray.kill(g.workers[0])
    assert g.shutdown(cleanup_method="pid") is False  # the cleanup call failed on the dead worker
    assert g.workers == [] and g._initializer_pool == {}
    again = RayWorkerGroup(two_nodes, FQN, name_prefix="dead")  # same names: the old actors are gone
    try:
        assert len(again.workers) == 4
    finally:
        assert again.shutdown(force=True) is True


def test_restart_replaces_a_dead_initializer(two_nodes, other_python) -> None:
    """An initializer actor that died took its workers with it (it owned them); a restart makes a
    new one on the bundle's node and the workers come back in the other Python."""
    g = RayWorkerGroup(two_nodes, FQN, name_prefix="rst", restart_on_failure=True)
    try:
        old = g._initializer_pool[1]
        ray.kill(old)
        deadline = time.monotonic() + 30  # the GCS reaps an owner's actors soon after it died
        while sorted(g.dead_workers()) != [2, 3] and time.monotonic() < deadline:
            time.sleep(0.1)
        assert sorted(g.dead_workers()) == [2, 3]  # node 1's workers went with their owner
        assert g.restart_failed_workers() == [2, 3]
        assert g._initializer_pool[1] is not old and alive(g._initializer_pool[1])
        assert ray.get(g.run_all_workers_single_data("python_env")) == [("1", "per-node-4")] * 4
    finally:
        g.shutdown(force=True)


def test_the_builder_alone_returns_the_worker_and_its_owner(two_nodes, other_python) -> None:
    """NeMo RL's RayWorkerBuilder(...)(pg, bundle, num_gpus) and create_worker_async."""
    pg = two_nodes.get_placement_groups()[0]
    worker = RayWorkerBuilder(FQN)(pg, 0, 0, None, name="alone")
    try:
        assert ray.get(worker.python_env.remote()) == ("1", "per-node-None")
        assert alive(worker._RAY_INITIALIZER_ACTOR_REF_TO_AVOID_GC)
    finally:
        ray.kill(worker)
    assert RayWorkerBuilder.IsolatedWorkerInitializer is RayWorkerBuilder.IsolatedWorkerInitializer


def test_configure_worker_of_2025_and_2026() -> None:
    from tests.unit.workers.simple import ConfiguredWorker, TopologyConfiguredWorker

    assert configure(ConfiguredWorker, 0, (0, [0]), 8)[0][1] == {"CONFIGURED": "yes-True"}  # no num_gpus_per_node
    assert configure(TopologyConfiguredWorker, 0, None, 8)[0][1] == {"CONFIGURED": "per-node-8"}


def test_workers_know_every_workers_address_and_a_free_port(two_nodes) -> None:
    """NeMo RL 2026's AVAILABLE_ADDR_LIST / AVAILABLE_PORT_LIST (rank order, Python literals),
    distinct ports in the cluster's range, none the group's rendezvous; NRL_WORKER_GROUP."""
    import ast

    g = RayWorkerGroup(two_nodes, "tests.unit.workers.simple.AddressWorker", name_prefix="policy")
    try:
        seen = ray.get(g.run_all_workers_single_data("addresses"))
        assert len({s[:2] for s in seen}) == 1  # every worker gets the same lists
        addrs, ports, group, master = seen[0][0], seen[0][1], seen[0][2], seen[0][3]
        addrs, ports = ast.literal_eval(addrs), ast.literal_eval(ports)
        assert len(addrs) == len(ports) == 4 and group == "policy"
        assert len(set(ports)) == 4 and int(master) not in ports
        assert all(two_nodes.port_range_low <= p <= two_nodes.port_range_high for p in ports)
    finally:
        g.shutdown(force=True)
