"""NeMo RL 2026's generation-engine placement: each vLLM engine's port window (one per engine
slot on its node, below the ephemeral floor even for engines wider than a node), the worker
options an engine's workers get, the batched address lookup the cluster does for them, and a
tied worker group of engines on a local Ray with logical GPUs."""

from __future__ import annotations

from unittest.mock import MagicMock

import pytest

from slurm_rl.core import ports
from slurm_rl.distributed import RayVirtualCluster, RayWorkerGroup
from slurm_rl.distributed import virtual_cluster as vc
from slurm_rl.models.generation.vllm import BaseVllmGenerationWorker, vllm_port

FLOOR = 9000  # the lowest ephemeral floor seen on GPU nodes


@pytest.mark.parametrize(
    ("local", "per_node", "slot"),
    [([0], None, 0), ([7], None, 7), ([4, 5, 6, 7], None, 1), ([6, 7], 8, 3), ([3], 4, 3), ([0, 1, 2, 3], 4, 0),
     (list(range(16)), 8, 0), (list(range(16, 32)), 8, 0), (list(range(8, 16)), 4, 0)],
)  # fmt: skip
def test_each_engine_slot_on_a_node_gets_its_own_port_window(local: list[int], per_node: int | None, slot: int) -> None:
    port = vllm_port(local, per_node)
    assert port == vc.DEFAULT_VLLM_PORT_RANGE_LOW + slot * vc.DEFAULT_VLLM_PORTS_PER_ENGINE
    assert port + vc.DEFAULT_VLLM_PORTS_PER_ENGINE <= FLOOR


def test_an_engines_workers_leave_the_gpus_to_vllm_and_only_its_first_gets_a_port() -> None:
    resources, env, kwargs, _ = BaseVllmGenerationWorker.configure_worker(1, (1, [2]), num_gpus_per_node=4)
    assert resources == {"num_gpus": 1} and env["VLLM_PORT"] == "7200" and kwargs["seed"] == 1024 + 2
    assert "RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES" not in env  # one GPU: Ray's CUDA_VISIBLE_DEVICES
    resources, env, kwargs, _ = BaseVllmGenerationWorker.configure_worker(0.5, (0, [2, 3]), num_gpus_per_node=4)
    assert resources == {"num_gpus": 0} and kwargs["fraction_of_gpus"] == 0.5 and kwargs["bundle_indices"] == [2, 3]
    assert env["RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES"] == "1" and env["VLLM_PORT"] == "7100"
    resources, env, kwargs, _ = BaseVllmGenerationWorker.configure_worker(1)  # another member of a wide engine
    assert "VLLM_PORT" not in env and resources == {"num_gpus": 0} and "bundle_indices" not in kwargs


def test_a_jobs_ray_ports_stay_clear_of_every_nemo_rl_band() -> None:
    bands_top = max(
        vc.DEFAULT_SGLANG_PROMETHEUS_PORT_RANGE_HIGH,
        vc.DEFAULT_VLLM_PORT_RANGE_LOW + 8 * vc.DEFAULT_VLLM_PORTS_PER_ENGINE,
        vc.DEFAULT_GYM_PORT_RANGE_HIGH,
    )
    assert bands_top < ports.PORT_RANGE_START  # GCS and --port-base blocks: 10000 and up


class FakeProbe:
    """The port probe: records each launch, answers by a fake ref."""

    def __init__(self) -> None:
        self.launched: list[tuple[object, int]] = []

    def options(self, scheduling_strategy: dict, num_cpus: int) -> FakeProbe:
        assert num_cpus == 0
        self.launched.append(
            (scheduling_strategy["placement_group"], scheduling_strategy["placement_group_bundle_index"])
        )
        return self

    def remote(self, low: int, high: int) -> str:
        return f"ref{len(self.launched) - 1}"


@pytest.fixture
def lookup(monkeypatch):  # type: ignore[no-untyped-def]
    probe, fake_ray = FakeProbe(), MagicMock()
    fake_ray.get.side_effect = lambda refs: [("10.0.0.1", 1500 + int(r[3:])) for r in refs]
    fake_ray.wait.side_effect = lambda refs, num_returns: (refs[-num_returns:], refs[:-num_returns])  # reversed
    monkeypatch.setattr(vc, "ray", fake_ray)
    monkeypatch.setattr(vc, "_get_node_ip_and_free_port", probe)
    monkeypatch.setattr(vc, "PlacementGroupSchedulingStrategy", lambda **kw: kw)
    cluster = RayVirtualCluster([], use_gpus=False)  # empty: nothing placed; groups set by hand
    groups = [MagicMock(bundle_specs=[{"CPU": 1}] * 2), MagicMock(bundle_specs=[{"CPU": 1}])]
    cluster._node_placement_groups = groups
    yield cluster, probe, fake_ray, groups
    cluster._node_placement_groups = []


def test_batched_lookup_keeps_the_input_order_and_one_call_serves_a_small_batch(lookup) -> None:  # type: ignore[no-untyped-def]
    cluster, probe, fake_ray, groups = lookup
    pairs = [(0, 0), (0, 1), (1, 0)]
    assert cluster.get_available_addresses_and_ports_batch(pairs) == [
        ("10.0.0.1", 1500),
        ("10.0.0.1", 1501),
        ("10.0.0.1", 1502),
    ]
    fake_ray.wait.assert_not_called()
    assert probe.launched == [(groups[0], 0), (groups[0], 1), (groups[1], 0)]
    in_pieces = cluster.get_available_addresses_and_ports_batch(pairs, batch_size=1)  # answers arrive last first
    assert [port for _, port in in_pieces] == [1503, 1504, 1505] and fake_ray.wait.call_count == 3
    assert cluster.get_available_address_and_port(1, 0) == ("10.0.0.1", 1506)


def test_a_single_group_serves_every_index_and_one_without_bundles_is_refused(lookup) -> None:  # type: ignore[no-untyped-def]
    cluster, probe, _, groups = lookup
    cluster._node_placement_groups = groups[:1]
    cluster.get_available_addresses_and_ports_batch([(0, 0), (3, 1)])
    assert probe.launched == [(groups[0], 0), (groups[0], 1)]
    cluster._node_placement_groups = [MagicMock(bundle_specs=[])]
    with pytest.raises(RuntimeError, match="No valid placement groups"):
        cluster.get_available_addresses_and_ports_batch([(0, 0)])


@pytest.mark.ray
@pytest.mark.timeout(180)
def test_tied_engines_on_two_nodes_get_their_slots_ports(many_gpu_ray) -> None:  # type: ignore[no-untyped-def]
    cluster = RayVirtualCluster([4, 4], use_gpus=True, num_gpus_per_node=4)
    engines = [(0, [0, 1]), (0, [2, 3]), (1, [0, 1]), (1, [2, 3])]
    group = RayWorkerGroup(cluster, "tests.unit.workers.vllm_like.EngineWorker", bundle_indices_list=engines)
    reports = group.get_results(group.run_all_workers_single_data("report"))
    leaders = [reports[w] for w in group.dp_leader_worker_indices]
    assert [r["port"] for r in leaders] == ["7000", "7100", "7000", "7100"]
    assert [r["bundle_indices"] for r in leaders] == [[0, 1], [2, 3], [0, 1], [2, 3]] and leaders[2]["seed"] == 1024
    assert {r["noset"] for r in reports} == {"1"}  # every worker of a 2-GPU engine leaves the GPUs to vLLM
    group.shutdown()
    cluster.shutdown()
