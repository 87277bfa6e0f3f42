"""A node's IP address and a free port on it, asked of the node itself (a zero-CPU Ray task):
the rendezvous address of a worker group (``RayVirtualCluster.get_master_address_and_port``).
NeMo RL's module-level names, which its code and tests use."""

from __future__ import annotations

import random
import socket
from collections.abc import Iterable
from typing import Any

from ...core.ports import bind_first

# Port ranges (NeMo RL 2026's layout; its users' configs name these). A worker group's rendezvous
# port (MASTER_PORT: torch's TCPStore, NCCL bootstrap) is picked in 1400-1999, below the
# kernel's ephemeral range (32768-60999 on stock Linux, as low as 9000 on some GPU nodes): an
# ephemeral port that is free when probed can be taken by any outgoing connection before the
# worker binds it; a port below that range cannot.
DEFAULT_DATA_PLANE_PORT_RANGE_LOW = 1100  # a data plane's metadata, master RPC and metrics servers
DEFAULT_DATA_PLANE_PORT_RANGE_HIGH = 1200
DEFAULT_GENERATION_ROUTER_PORT_RANGE_LOW = 1202  # a single-controller generation router (driver-local)
DEFAULT_GENERATION_ROUTER_PORT_RANGE_HIGH = 1300
DEFAULT_DYNAMO_CONTROL_PORT_RANGE_LOW = 1313  # Dynamo's etcd/NATS control plane (driver-local)
DEFAULT_DYNAMO_CONTROL_PORT_RANGE_HIGH = 1400
DEFAULT_MASTER_PORT_RANGE_LOW = 1400
DEFAULT_MASTER_PORT_RANGE_HIGH = 1999
DEFAULT_GENERATION_PORT_RANGE_LOW = 3000
DEFAULT_GENERATION_PORT_RANGE_HIGH = 4999
DEFAULT_GYM_PORT_RANGE_LOW = 5000
DEFAULT_GYM_PORT_RANGE_HIGH = 5999
DEFAULT_VLLM_PORT_RANGE_LOW = 7000
DEFAULT_VLLM_PORTS_PER_ENGINE = 100
DEFAULT_SGLANG_ROUTER_PORT_RANGE_LOW = 8600
DEFAULT_SGLANG_ROUTER_PORT_RANGE_HIGH = 8799
DEFAULT_SGLANG_PROMETHEUS_PORT_RANGE_LOW = 8800
DEFAULT_SGLANG_PROMETHEUS_PORT_RANGE_HIGH = 8999

# Topology: the Ray resource names NeMo RL's launcher gives nodes (an NVLink domain per rack, a
# rank from SLURM's topology), and what a node without them reports.
NVLINK_DOMAIN_PREFIX = "nvlink_domain_"
TOPO_RANK_KEY = "topo_rank"
NVLINK_DOMAIN_UNKNOWN = "unknown"
TOPO_RANK_UNKNOWN = -1


def check_port_range(low: int, high: int) -> None:
    if not (isinstance(low, int) and isinstance(high, int) and 1 <= low < high <= 65536):
        raise ValueError(f"port range [{low}, {high}) is not a range of TCP ports: need 1 <= low < high <= 65536")


def _get_node_ip_local() -> str:
    """This node's address as its Ray knows it (the spec's network_interface, if set)."""
    import ray

    ip = ray.util.get_node_ip_address()
    return socket.gethostbyname(socket.gethostname()) if ip.startswith("0.") else ip


def _bind_socket_in_range(
    sock: socket.socket,
    port_range_low: int,
    port_range_high: int,
    max_retries: int | None = 50,
    excluded_ports: set[int] | None = None,
    rng: random.Random | None = None,
) -> int:
    """Bind ``sock`` to a free port in [low, high) and return it.

    ``max_retries`` random draws (a draw in ``excluded_ports`` counts as a try), or, with
    ``max_retries=None``, every port of the range not excluded once, in random order.
    ``rng`` (default: the ``random`` module) makes the draws: callers on one node that seed it
    differently (e.g. by rank) do not all try the same ports first. RuntimeError when none binds."""
    check_port_range(port_range_low, port_range_high)
    draw = rng or random
    excluded = excluded_ports or set()
    candidates: Iterable[int]
    if max_retries is None:
        every = [p for p in range(port_range_low, port_range_high) if p not in excluded]
        draw.shuffle(every)
        candidates, tried = every, f"all {len(every)} available ports"
    else:  # drawn one at a time: a port that binds ends the draws
        candidates = (draw.randint(port_range_low, port_range_high - 1) for _ in range(max_retries))
        tried = f"{max_retries} attempts"
    port = bind_first(sock, (p for p in candidates if p not in excluded))
    if port is not None:
        return port
    raise RuntimeError(f"Could not find a free port in range [{port_range_low}, {port_range_high}) after {tried}.")


def _get_free_port_local(
    port_range_low: int = DEFAULT_MASTER_PORT_RANGE_LOW,
    port_range_high: int = DEFAULT_MASTER_PORT_RANGE_HIGH,
    *,
    max_retries: int | None = 50,
    excluded_ports: set[int] | None = None,
) -> int:
    """A port of [low, high) that was free a moment ago (bound, listened on, released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        port = _bind_socket_in_range(
            s, port_range_low, port_range_high, max_retries=max_retries, excluded_ports=excluded_ports
        )
        s.listen(1)
    return port


def _get_free_consecutive_ports_local(
    port_range_low: int, port_range_high: int, consecutive: int = 1, start_port: int | None = None
) -> int:
    """The first port of ``consecutive`` free ports in a row, scanning up from ``start_port``
    (or the range's start); RuntimeError if the range has no such block."""
    if consecutive < 1:  # NeMo RL's contract is an AssertionError (raised: asserts vanish under -O)
        raise AssertionError(f"consecutive must be >= 1, got {consecutive}")
    check_port_range(port_range_low, port_range_high)
    base = port_range_low if start_port is None else max(start_port, port_range_low)
    while base + consecutive <= port_range_high:
        held: list[socket.socket] = []
        try:
            for port in range(base, base + consecutive):
                s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                held.append(s)
                s.bind(("", port))
            return base
        except OSError:
            base += 1
        finally:
            for s in held:
                s.close()
    raise RuntimeError(f"Could not find {consecutive} consecutive free ports in [{port_range_low}, {port_range_high}).")


def _get_node_ip_and_free_port_impl(
    port_range_low: int = DEFAULT_MASTER_PORT_RANGE_LOW, port_range_high: int = DEFAULT_MASTER_PORT_RANGE_HIGH
) -> tuple[str, int]:
    return _get_node_ip_local(), _get_free_port_local(port_range_low, port_range_high)


def _remote_port_probe() -> Any:
    import ray

    return ray.remote(num_cpus=0)(_get_node_ip_and_free_port_impl)


class _LazyRemote:
    """``_get_node_ip_and_free_port`` as a Ray remote function, created on first use (importing
    this module must not need a running Ray). Tests patch it by this name."""

    def __init__(self) -> None:
        self._fn: Any = None

    def options(self, **kw: Any) -> Any:
        if self._fn is None:
            self._fn = _remote_port_probe()
        return self._fn.options(**kw)

    def remote(self, *a: Any, **kw: Any) -> Any:
        return self.options().remote(*a, **kw)


_get_node_ip_and_free_port = _LazyRemote()

__all__ = [
    "DEFAULT_DATA_PLANE_PORT_RANGE_HIGH",
    "DEFAULT_DATA_PLANE_PORT_RANGE_LOW",
    "DEFAULT_DYNAMO_CONTROL_PORT_RANGE_HIGH",
    "DEFAULT_DYNAMO_CONTROL_PORT_RANGE_LOW",
    "DEFAULT_GENERATION_PORT_RANGE_HIGH",
    "DEFAULT_GENERATION_PORT_RANGE_LOW",
    "DEFAULT_GENERATION_ROUTER_PORT_RANGE_HIGH",
    "DEFAULT_GENERATION_ROUTER_PORT_RANGE_LOW",
    "DEFAULT_GYM_PORT_RANGE_HIGH",
    "DEFAULT_GYM_PORT_RANGE_LOW",
    "DEFAULT_MASTER_PORT_RANGE_HIGH",
    "DEFAULT_MASTER_PORT_RANGE_LOW",
    "DEFAULT_SGLANG_PROMETHEUS_PORT_RANGE_HIGH",
    "DEFAULT_SGLANG_PROMETHEUS_PORT_RANGE_LOW",
    "DEFAULT_SGLANG_ROUTER_PORT_RANGE_HIGH",
    "DEFAULT_SGLANG_ROUTER_PORT_RANGE_LOW",
    "DEFAULT_VLLM_PORTS_PER_ENGINE",
    "DEFAULT_VLLM_PORT_RANGE_LOW",
    "NVLINK_DOMAIN_PREFIX",
    "NVLINK_DOMAIN_UNKNOWN",
    "TOPO_RANK_KEY",
    "TOPO_RANK_UNKNOWN",
    "_bind_socket_in_range",
    "_get_free_consecutive_ports_local",
    "_get_free_port_local",
    "_get_node_ip_and_free_port",
    "_get_node_ip_and_free_port_impl",
    "_get_node_ip_local",
    "check_port_range",
]
