"""Rendezvous ports as NeMo RL 2026 picks them: in a range below the kernel's ephemeral ports
(1400-1999 unless the cluster says otherwise), a new one on every call, found by the node itself."""

from __future__ import annotations

import socket

import pytest
import ray

from slurm_rl.distributed import virtual_cluster as vc
from slurm_rl.distributed.virtual_cluster import (
    DEFAULT_MASTER_PORT_RANGE_HIGH,
    DEFAULT_MASTER_PORT_RANGE_LOW,
    RayVirtualCluster,
    _bind_socket_in_range,
    _get_free_consecutive_ports_local,
    _get_free_port_local,
)

pytestmark = [pytest.mark.timeout(120)]


def test_a_free_port_in_the_range_or_a_clear_error() -> None:
    assert DEFAULT_MASTER_PORT_RANGE_LOW <= _get_free_port_local() < DEFAULT_MASTER_PORT_RANGE_HIGH
    with socket.socket() as taken:
        taken.bind(("", 0))
        port = taken.getsockname()[1]
        taken.listen(1)
        with socket.socket() as s, pytest.raises(RuntimeError, match=rf"free port in range \[{port}, {port + 1}\)"):
            _bind_socket_in_range(s, port, port + 1, max_retries=3)
    with pytest.raises(ValueError, match="not a range of TCP ports"):
        _get_free_port_local(2000, 1400)


def test_consecutive_ports_skip_a_taken_one() -> None:
    base = _get_free_consecutive_ports_local(20000, 20100, consecutive=3)
    with socket.socket() as taken:
        taken.bind(("", base + 1))
        taken.listen(1)
        again = _get_free_consecutive_ports_local(20000, 20100, consecutive=3, start_port=base)
    assert again >= base + 2
    with pytest.raises(RuntimeError, match="4 consecutive free ports"):
        _get_free_consecutive_ports_local(20000, 20003, consecutive=4)


@pytest.mark.ray
def test_the_cluster_hands_out_unique_ports_in_its_range_and_batches_in_order(many_gpu_ray) -> None:
    with pytest.raises(ValueError, match="not a range of TCP ports"):
        RayVirtualCluster([1], use_gpus=False, port_range_low=5000, port_range_high=5000)
    cluster = RayVirtualCluster([2, 1], use_gpus=False, port_range_low=21000, port_range_high=21050)
    try:
        ports = [cluster.get_master_address_and_port()[1] for _ in range(5)]
        assert len(set(ports)) == 5 and all(21000 <= p < 21050 for p in ports)
        pairs = [(0, 1), (1, 0), (0, 0)]
        got = cluster.get_available_addresses_and_ports_batch(pairs, batch_size=1)
        assert len(got) == 3 and all(21000 <= p < 21050 for _, p in got)
        ip, port = cluster.get_available_address_and_port(1, 0)
        assert ip == ray.util.get_node_ip_address() and 21000 <= port < 21050
    finally:
        cluster.shutdown()


@pytest.mark.ray
def test_patching_the_public_module_patches_what_the_cluster_calls(many_gpu_ray, monkeypatch) -> None:
    """NeMo RL's tests patch nemo_rl.distributed.virtual_cluster._get_node_ip_and_free_port."""

    class Probe:
        def options(self, **_kw):
            return self

        def remote(self, low: int, high: int):
            return ray.put(("10.9.9.9", low))

    monkeypatch.setattr(vc, "_get_node_ip_and_free_port", Probe())
    cluster = RayVirtualCluster([1], use_gpus=False, port_range_low=1500, port_range_high=1600)
    try:
        assert cluster.get_available_address_and_port(0, 0) == ("10.9.9.9", 1500)
    finally:
        cluster.shutdown()
