"""Worker-group reliability on an embedded Ray (one node): failures become WorkerFailureError
fast, restarts keep rank/env/arguments and re-form the rendezvous, status/usage/stuck report
what a user needs, memory limits stop the worker that passes them, load balancing and async
results keep input order. The multi-node cases (a worker on node 2, a lost node) are lab tests."""

from __future__ import annotations

import logging
import os
import signal
import time

import pytest
import ray
from ray.exceptions import RayActorError

from slurm_rl.distributed import RayVirtualCluster, RayWorkerGroup, WorkerFailureError
from slurm_rl.distributed._engine.futures import WorkerRefs
from slurm_rl.distributed._engine.reliability import status as status_module
from slurm_rl.distributed._engine.reliability.health import parse_memory
from tests.unit.conftest import local_ray

pytestmark = [pytest.mark.timeout(240), pytest.mark.ray]  # starts a local Ray: `pytest -m unit` skips it
PROBE = "tests.unit.workers.reliable.ProbeWorker"
GLOO = "tests.unit.workers.reliable.GlooRank"


@pytest.fixture(scope="module")
def ray_4():
    with local_ray(num_cpus=6, num_gpus=4):
        yield


@pytest.fixture
def cpu_cluster(ray_4):
    cluster = RayVirtualCluster([3], use_gpus=False)
    yield cluster
    cluster.shutdown()


def _kill(group: RayWorkerGroup, worker: int) -> None:
    pid = group.get_worker_status()[worker]["pid"]
    os.kill(pid, signal.SIGKILL)


def test_dead_worker_mid_call_is_named_fast_and_restarts_in_place(cpu_cluster) -> None:
    group = RayWorkerGroup(cpu_cluster, PROBE, max_restarts=1)
    before = group.get_results(group.run_all_workers_single_data("ident"))
    refs = group.run_all_workers_single_data("sleep", 6)  # the survivors' hooks wait for this call
    _kill(group, 1)
    t0 = time.monotonic()
    with pytest.raises(WorkerFailureError) as err:
        group.get_results(refs)
    assert time.monotonic() - t0 < 5  # long before the other workers' calls end
    assert isinstance(err.value, RayActorError)  # existing `except RayActorError` still catch it
    assert err.value.worker_indices == [1]
    assert "worker 1 (rank 1)" in str(err.value) and "worker process has died" in str(err.value)
    with pytest.raises(RayActorError) as bare:
        ray.get(refs[1])
    assert not isinstance(bare.value, WorkerFailureError)  # a bare ray.get keeps Ray's own error
    assert [(s["state"], s["gpu_ids"]) for s in group.get_worker_status()] == [
        ("alive", []),
        ("dead", []),
        ("alive", []),
    ]  # a CPU group: no GPUs

    assert group.restart_failed_workers() == [1]
    after = group.get_results(group.run_all_workers_single_data("ident"))
    assert [a["rank"] for a in after] == [0, 1, 2]
    assert after[1]["pid"] != before[1]["pid"] and after[0]["pid"] == before[0]["pid"]
    assert {a["master_port"] for a in after} != {before[0]["master_port"]}  # a new rendezvous for all
    assert len({a["master_port"] for a in after}) == 1
    assert [a["hooks"] for a in after] == [1, 0, 1]  # on_group_restart on the survivors; a fresh __init__ for 1
    assert group.get_worker_status()[1]["restarts"] == 1

    _kill(group, 1)  # max_restarts=1 is used up: the next restart is refused, clearly
    with pytest.raises(WorkerFailureError, match="worker 1"):
        group.get_results(group.run_all_workers_single_data("ident"))
    with pytest.raises(WorkerFailureError, match="already restarted max_restarts=1 times"):
        group.restart_failed_workers()
    group.shutdown()


def test_worker_status_names_each_workers_gpus_and_a_restart_renews_them(ray_4) -> None:
    cluster = RayVirtualCluster([2], use_gpus=True, num_gpus_per_node=2)
    group = RayWorkerGroup(cluster, PROBE, max_restarts=1)
    seen = [w["cuda"] for w in group.get_results(group.run_all_workers_single_data("ident"))]
    status = group.get_worker_status()
    assert [s["gpu_ids"] for s in status] == [[int(c)] for c in seen] and len(set(seen)) == 2, (status, seen)
    _kill(group, 1)
    with pytest.raises(WorkerFailureError):
        group.get_results(group.run_all_workers_single_data("ident"))
    assert group.restart_failed_workers() == [1]
    again = [w["cuda"] for w in group.get_results(group.run_all_workers_single_data("ident"))]
    assert [s["gpu_ids"] for s in group.get_worker_status()] == [[int(c)] for c in again]
    group.shutdown(force=True)
    cluster.shutdown()


def test_restart_on_failure_retries_a_call_once_and_logs_it(cpu_cluster, caplog) -> None:
    group = RayWorkerGroup(cpu_cluster, PROBE, restart_on_failure=True, max_restarts=2)
    refs = group.run_all_workers_single_data("sleep", 3)
    _kill(group, 2)
    with caplog.at_level(logging.WARNING):
        assert group.get_results(refs) == [0, 1, 2]
    assert "running 'sleep' again" in caplog.text
    # the futures of multiple-data dispatch name the dead worker too (no hang)
    future = group.run_all_workers_multiple_data("sleep", [30, 30, 30])
    _kill(group, 0)
    with pytest.raises(WorkerFailureError, match="worker 0"):
        group.get_all_worker_results(future)
    group.shutdown()


def test_status_usage_and_stuck_worker_with_its_stack(cpu_cluster, monkeypatch) -> None:
    group = RayWorkerGroup(cpu_cluster, PROBE)
    group.run_single_worker_single_data("sleep", 0, 30)
    deadline = time.monotonic() + 30  # wait until the call has run past the threshold
    while (group.get_worker_status()[0]["running_s"] or 0) < 1.0 and time.monotonic() < deadline:
        time.sleep(0.1)
    status = group.get_worker_status()
    assert status[0]["current_call"] == "sleep" and status[0]["running_s"] >= 1.0
    assert status[1]["current_call"] is None and status[1]["state"] == "alive"
    usage = group.get_resource_usage()
    assert all(u["rss_bytes"] > 10 * 2**20 for u in usage) and all(u["cpu_percent"] is not None for u in usage)
    stuck = group.detect_stuck_workers(timeout_s=1.0)
    assert [s["worker"] for s in stuck] == [0]
    assert "ProbeWorker.sleep" in stuck[0]["stack"] and "reliable.py" in stuck[0]["stack"]
    group.print_worker_status()
    group.print_resource_usage()

    # a call that ends while its stack is being taken is not reported stuck (the stack would
    # show an idle worker): here the nodes' probe answers only once worker 1's call is over
    short = group.run_single_worker_single_data("sleep", 1, 1.5)
    while (group.get_worker_status()[1]["running_s"] or 0) < 1.0 and time.monotonic() < deadline + 30:
        time.sleep(0.1)

    class LateProbe:
        class stack:  # stands in for the probe actor's method
            @staticmethod
            def remote(pid: int) -> ray.ObjectRef:
                ray.get(short)
                return ray.put(f"Process {pid} (idle)")

    monkeypatch.setattr(status_module, "probe_on", lambda node_id: LateProbe)
    assert [s["worker"] for s in group.detect_stuck_workers(timeout_s=1.0)] == [0]
    group.shutdown(force=True)


def test_memory_limit_stops_only_the_worker_that_passes_it(cpu_cluster) -> None:
    group = RayWorkerGroup(cpu_cluster, PROBE, memory_limit="300MB")
    hog = group.run_single_worker_single_data("hog", 1, 600)
    quiet = group.run_single_worker_single_data("sleep", 0, 0.1)
    with pytest.raises(WorkerFailureError, match="memory limit") as err:
        group.get_results(WorkerRefs([hog], [1]))
    assert err.value.worker_indices == [1] and "memory_limit of 286 MiB" in str(err.value)
    assert ray.get(quiet) == 0
    assert group.get_results([group.run_single_worker_single_data("noop", 0)]) == [None]
    with pytest.raises(WorkerFailureError, match="call restart_failed_workers"):  # no doomed refs to a dead worker
        group.run_all_workers_single_data("noop")
    group.shutdown(force=True)
    with pytest.raises(ValueError, match="do not fit in the memory Ray has free"):
        RayWorkerGroup(cpu_cluster, PROBE, memory_limit="100TB")
    with pytest.raises(ValueError, match="memory_limit='eight'"):
        RayWorkerGroup(cpu_cluster, PROBE, memory_limit="eight")
    assert parse_memory("8GB") == 8 * 10**9 and parse_memory("512MiB") == 512 * 2**20


def test_gloo_group_all_reduces_again_after_a_rank_restarts(ray_4) -> None:
    cluster = RayVirtualCluster([3], use_gpus=False, communication_backend="gloo")
    try:
        group = RayWorkerGroup(cluster, GLOO, max_restarts=1)
        assert group.get_results(group.run_all_workers_single_data("allreduce", 1.0)) == [3.0, 3.0, 3.0]
        os.kill(group.get_results(group.run_all_workers_single_data("pid"))[1], signal.SIGKILL)
        with pytest.raises(WorkerFailureError):
            group.get_results(group.run_all_workers_single_data("pid"))
        group.restart_failed_workers()
        assert group.get_results(group.run_all_workers_single_data("allreduce", 2.0)) == [6.0, 6.0, 6.0]
        group.shutdown(force=True)
    finally:
        cluster.shutdown()


def test_gradient_compression_rounds_the_averaged_gradient_to_fp16(ray_4) -> None:
    cluster = RayVirtualCluster([2], use_gpus=False, communication_backend="gloo")
    try:
        plain = RayWorkerGroup(cluster, GLOO, name_prefix="plain")
        exact = plain.get_results(plain.run_all_workers_single_data("compressed_grad"))
        plain.shutdown(force=True)
        packed = RayWorkerGroup(cluster, GLOO, name_prefix="fp16", enable_gradient_compression=True)
        rounded = packed.get_results(packed.run_all_workers_single_data("compressed_grad"))
        packed.shutdown(force=True)
    finally:
        cluster.shutdown()
    mean_x = (exact[0][1] + exact[1][1]) / 2  # d(w*x)/dw = x, averaged over the two ranks
    assert abs(exact[0][0] - mean_x) < 1e-6
    import torch

    assert rounded[0][0] == pytest.approx(float(torch.tensor(mean_x).half().float()), abs=1e-7)
    assert rounded[0][0] != exact[0][0]


def _units_per_rank(results: list[tuple[int, int]], items: list[tuple[int, int]]) -> dict[int, int]:
    assert [index for index, _ in results] == list(range(len(items)))  # input order
    per_rank: dict[int, int] = {}
    for (_, rank), (_, units) in zip(results, items, strict=True):
        per_rank[rank] = per_rank.get(rank, 0) + units
    return per_rank


def test_load_balancing_keeps_input_order_and_least_loaded_evens_out_a_bad_static_split(ray_4) -> None:
    cluster = RayVirtualCluster([3], use_gpus=False)
    try:
        items = [(i, 8 if i % 3 == 0 else 1) for i in range(18)]  # every 3rd item lines up with worker 0
        rr = RayWorkerGroup(cluster, PROBE, name_prefix="rr", load_balancing_strategy="round_robin")
        # round robin is a static split: rank 0 gets all six 8-unit items, 48 of the 60 units
        assert _units_per_rank(rr.run_balanced("cost", items, common_kwargs={"unit_s": 0.05}), items) == {
            0: 48,
            1: 6,
            2: 6,
        }
        rr.shutdown(force=True)
        ll = RayWorkerGroup(
            cluster, PROBE, name_prefix="ll", enable_load_balancing=True, load_balancing_strategy="least_loaded"
        )
        ll.get_results(ll.run_all_workers_single_data("noop"))  # all three up: none starts late
        per_rank = _units_per_rank(ll.run_balanced("cost", items, common_kwargs={"unit_s": 0.05}), items)
        # the next item goes to whoever finished first: about 20 units each, never rank 0's 48
        assert sorted(per_rank) == [0, 1, 2] and max(per_rank.values()) <= 32, per_rank
        with pytest.raises(ValueError, match="load_balancing_strategy='fastest'"):
            RayWorkerGroup(cluster, PROBE, load_balancing_strategy="fastest")
        ll.shutdown(force=True)
        plain = RayWorkerGroup(cluster, PROBE, name_prefix="plain")
        with pytest.raises(ValueError, match="enable_load_balancing=True"):
            plain.run_balanced("cost", items)
        plain.shutdown(force=True)
    finally:
        cluster.shutdown()


def test_async_communication_yields_results_in_completion_order(cpu_cluster) -> None:
    group = RayWorkerGroup(cpu_cluster, PROBE, async_communication=True)
    t0 = time.monotonic()
    results = group.run_all_workers_multiple_data("sleep", [3.0, 0.1, 1.5])  # margins for a busy machine
    single = group.run_all_workers_single_data("noop")
    assert time.monotonic() - t0 < 1.5  # returned at once, long before the first call ends
    assert [w for w, _ in results.as_completed(group)] == [1, 2, 0]
    assert [w for w, _ in single] and sorted(w for w, _ in single) == [0, 1, 2]
    assert single.get() == [None, None, None]
    group.shutdown()


def test_gpu_ids_pin_bundles_to_devices_and_are_checked(ray_4) -> None:
    cluster = RayVirtualCluster([2], gpu_ids=[3, 1], communication_backend="gloo")
    try:
        group = RayWorkerGroup(cluster, PROBE)
        seen = group.get_results(group.run_all_workers_single_data("ident"))
        assert [s["cuda"] for s in seen] == ["3", "1"] and {s["backend"] for s in seen} == {"gloo"}
        group.shutdown(force=True)
    finally:
        cluster.shutdown()
    auto = RayVirtualCluster([2], gpu_ids="auto")
    assert auto.bundle_devices == [[0, 1]]
    auto.shutdown()
    with pytest.raises(ValueError, match="node 0: \\[7\\], but that node has 4 GPU"):
        RayVirtualCluster([1], gpu_ids=[7])
    with pytest.raises(ValueError, match="one device id per bundle"):
        RayVirtualCluster([2], gpu_ids=[0])
    with pytest.raises(ValueError, match="communication_backend='mpi'"):
        RayVirtualCluster([1], communication_backend="mpi")


def test_enable_colocation_means_two_groups_per_bundle(ray_4) -> None:
    cluster = RayVirtualCluster([2], enable_colocation=True)
    try:
        assert cluster.max_colocated_worker_groups == 2
        a = RayWorkerGroup(cluster, PROBE, name_prefix="a")
        b = RayWorkerGroup(cluster, PROBE, name_prefix="b")
        gpus = [ray.get(w.__ray_call__.remote(lambda self: ray.get_gpu_ids())) for w in a.workers + b.workers]
        assert sorted(g[0] for g in gpus[:2]) == sorted(g[0] for g in gpus[2:])  # the same devices, shared
        a.shutdown(force=True)
        b.shutdown(force=True)
    finally:
        cluster.shutdown()
    assert (
        RayVirtualCluster([1], enable_colocation=True, max_colocated_worker_groups=3).max_colocated_worker_groups == 3
    )


def test_monitor_memory_warns_when_a_node_runs_low(ray_4, monkeypatch, caplog) -> None:
    monkeypatch.setenv("SLURM_RL_MEMORY_WARN_FRACTION", "1.01")  # every node is "low": the warning path
    monkeypatch.setenv("SLURM_RL_MEMORY_MONITOR_S", "0.5")
    with caplog.at_level(logging.WARNING):
        cluster = RayVirtualCluster([1], use_gpus=False, monitor_memory=True)
        try:
            deadline = time.monotonic() + 60
            while not cluster.memory_monitor.warnings and time.monotonic() < deadline:
                time.sleep(0.2)
            assert cluster.memory_monitor.warnings
            assert "is low on memory" in cluster.memory_monitor.warnings[0]
            assert "GiB available" in caplog.text
        finally:
            cluster.shutdown()


def test_tied_workers_restart_together(ray_4) -> None:
    cluster = RayVirtualCluster([4], use_gpus=False)
    try:
        group = RayWorkerGroup(cluster, PROBE, bundle_indices_list=[(0, [0, 1]), (0, [2, 3])])
        before = [s["pid"] for s in group.get_worker_status()]
        os.kill(before[1], signal.SIGKILL)  # one member of tied group 0
        deadline = time.monotonic() + 10
        while group.get_worker_status()[1]["state"] != "dead" and time.monotonic() < deadline:
            time.sleep(0.1)
        assert group.restart_failed_workers() == [0, 1]  # its partner restarts with it
        after = [s["pid"] for s in group.get_worker_status()]
        assert after[0] != before[0] and after[1] != before[1] and after[2:] == before[2:]
        assert [r["rank"] for r in group.get_results(group.run_all_workers_single_data("ident"))] == [0, 1, 2, 3]
        group.shutdown(force=True)
    finally:
        cluster.shutdown()
