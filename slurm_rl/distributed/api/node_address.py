"""A node's IP address and a free port on it, asked of the node itself (a zero-CPU Ray task):
the rendezvous address of a worker group (``RayVirtualCluster.get_master_address_and_port``).
NeMo RL's module-level names, which its code and tests use."""

from __future__ import annotations

from typing import Any


def _get_node_ip_and_free_port_impl() -> tuple[str, int]:
    import socket

    import ray

    ip = ray.util.get_node_ip_address()
    if ip.startswith("0."):
        ip = socket.gethostbyname(socket.gethostname())
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("", 0))
        port = s.getsockname()[1]
    return ip, port


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
