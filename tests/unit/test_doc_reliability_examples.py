"""The documentation's reliability, resource and performance examples
(../shared/docs/nemo-rl-distributed.md), as written: memory sizes scaled to this machine,
logical GPUs (``many_gpu_ray``: 24 declared, none needed)."""

from __future__ import annotations

import os
import signal

import pytest
import ray

from slurm_rl.distributed import RayVirtualCluster, RayWorkerGroup, WorkerFailureError
from tests.unit.workers.reliable import LightPolicyWorker

PolicyWorker = GenerationWorker = LightPolicyWorker  # the documentation's placeholders

pytestmark = [pytest.mark.timeout(300), pytest.mark.ray]  # starts a local Ray: `pytest -m unit` skips it
batch = {"input": ["a", "b"]}  # the documentation leaves `batch` to the reader


def test_doc_colocation(many_gpu_ray) -> None:
    # Create cluster with colocation support
    cluster = RayVirtualCluster([8], enable_colocation=True)

    # Create separate worker groups for different components
    policy_workers = RayWorkerGroup(cluster, PolicyWorker)
    generation_workers = RayWorkerGroup(cluster, GenerationWorker)

    # Both worker groups can run on the same GPUs in turn
    trained = policy_workers.run_all_workers_single_data("train_step", batch)
    generated = generation_workers.run_all_workers_single_data("generate", batch)

    # every worker of both groups ran its call on the shared bundles (8 each)
    assert ray.get(trained) == [{"loss": 2.0}] * 8
    assert ray.get(generated) == [["a -> ok", "b -> ok"]] * 8
    assert cluster.max_colocated_worker_groups == 2 and ray.available_resources().get("GPU", 0) == 16
    policy_workers.shutdown(force=True)
    generation_workers.shutdown(force=True)
    cluster.shutdown()


def test_doc_gpu_allocation(many_gpu_ray) -> None:
    # Allocate specific GPUs to workers
    cluster = RayVirtualCluster([4], gpu_ids=[0, 1, 2, 3])
    assert cluster.bundle_devices == [[0, 1, 2, 3]]
    cluster.shutdown()

    # Allocate GPUs across multiple nodes (one local Ray node with 24 GPUs: both lists fit it)
    cluster = RayVirtualCluster([4, 4], gpu_ids=[[0, 1, 2, 3], [4, 5, 6, 7]])
    assert cluster.bundle_devices == [[0, 1, 2, 3], [4, 5, 6, 7]]
    cluster.shutdown()

    # Use all available GPUs
    cluster = RayVirtualCluster([8], gpu_ids="auto")
    assert cluster.bundle_devices == [list(range(8))]
    cluster.shutdown()


def test_doc_memory_management(many_gpu_ray) -> None:
    # Monitor GPU memory usage
    cluster = RayVirtualCluster([4], monitor_memory=True)

    # Set memory limits per worker ("8GB" scaled to this machine)
    worker_group = RayWorkerGroup(cluster, PolicyWorker, memory_limit="512MB")
    assert worker_group.memory_limit_bytes == 512 * 10**6
    assert cluster.memory_monitor.sample()  # one reading per node of the cluster
    worker_group.shutdown(force=True)
    cluster.shutdown()


def test_doc_worker_failure_recovery(many_gpu_ray) -> None:
    cluster = RayVirtualCluster([2])
    # Configure automatic restart on failure
    worker_group = RayWorkerGroup(cluster, PolicyWorker, restart_on_failure=True, max_restarts=3)
    os.kill(worker_group.get_worker_status()[1]["pid"], signal.SIGKILL)  # the failure to recover from

    # Handle specific failure scenarios
    try:
        result = worker_group.run_all_workers_single_data("train_step", batch)
    except WorkerFailureError:
        # Handle worker failure
        worker_group.restart_failed_workers()
        result = worker_group.run_all_workers_single_data("train_step", batch)

    assert len(worker_group.get_results(result)) == 2  # restarted and rerun once, by itself (logged)
    assert worker_group.get_worker_status()[1]["restarts"] == 1
    worker_group.shutdown(force=True)
    cluster.shutdown()


def test_doc_health_monitoring(many_gpu_ray) -> None:
    cluster = RayVirtualCluster([2])
    worker_group = RayWorkerGroup(cluster, PolicyWorker)
    # Get worker status
    status = worker_group.get_worker_status()

    # Monitor resource usage
    usage = worker_group.get_resource_usage()

    # Check for stuck workers
    stuck_workers = worker_group.detect_stuck_workers()

    assert [s["state"] for s in status] == ["alive", "alive"] and len(usage) == 2 and stuck_workers == []
    worker_group.shutdown(force=True)
    cluster.shutdown()


def test_doc_communication_and_load_balancing(many_gpu_ray) -> None:
    # Use efficient communication backend
    cluster = RayVirtualCluster([8], communication_backend="nccl")

    # Enable gradient compression
    worker_group = RayWorkerGroup(cluster, PolicyWorker, enable_gradient_compression=True)
    assert worker_group.enable_gradient_compression
    worker_group.shutdown(force=True)

    # Use asynchronous communication
    worker_group = RayWorkerGroup(cluster, PolicyWorker, async_communication=True)
    assert sorted(w for w, _ in worker_group.run_all_workers_single_data("train_step", batch)) == list(range(8))
    worker_group.shutdown(force=True)

    # Enable dynamic load balancing
    worker_group = RayWorkerGroup(cluster, PolicyWorker, enable_load_balancing=True)
    assert worker_group.load_balancing_strategy == "round_robin"
    worker_group.shutdown(force=True)

    # Set custom load balancing strategy
    worker_group = RayWorkerGroup(cluster, PolicyWorker, load_balancing_strategy="round_robin")
    losses = worker_group.run_balanced("train_step", [batch] * 20)
    assert len(losses) == 20 and all("loss" in r for r in losses)
    worker_group.shutdown(force=True)
    cluster.shutdown()


def test_doc_configuration_dicts(many_gpu_ray) -> None:
    # Basic configuration
    cluster_config = {
        "bundle_ct_per_node_list": [8],
        "gpu_ids": [0, 1, 2, 3, 4, 5, 6, 7],
        "enable_colocation": True,
        "communication_backend": "nccl",
        "monitor_memory": True,
    }

    cluster = RayVirtualCluster(**cluster_config)

    # Worker group configuration ("8GB" scaled to this machine)
    worker_config = {
        "memory_limit": "256MB",
        "restart_on_failure": True,
        "max_restarts": 3,
        "enable_gradient_compression": True,
        "async_communication": True,
    }

    worker_group = RayWorkerGroup(cluster, PolicyWorker, **worker_config)
    seen = dict(worker_group.run_all_workers_single_data("train_step", batch))
    assert sorted(seen) == list(range(8))
    worker_group.shutdown(force=True)
    cluster.shutdown()
