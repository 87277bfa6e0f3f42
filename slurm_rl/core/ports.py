"""Ports of a job's Ray, chosen on each node when it starts, so that nothing the job does not
control can collide with it: not another job sharing the node, not another user's service.

Only the GCS port must be known to other nodes: the head takes the port derived from the job id
when it is free (predictable, e.g. for firewall rules), else any free port, and publishes it in
the job dir (cluster.json). The dashboard agent's and the dashboard's ports, and Ray Client's
(``--ray-client``, head only, published the same way), are taken free on each node (Ray's
defaults are fixed numbers that two jobs on one node would share); every other
daemon port and every worker port is left to Ray and the OS (``--min/max-worker-port=0``: no
80-worker ceiling, thousands of workers per node). ``--port-base`` pins the daemon ports to an
explicit block instead, checked on each node with a clear error when one is taken.
"""

from __future__ import annotations

import contextlib
import random
import socket
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

from .errors import SlurmRlError, UsageError

PORT_RANGE_START = 10000
PORT_RANGE_END = 32000  # below Linux's default ephemeral range (32768-60999)
BLOCK_SIZE = 10  # daemon ports of an explicit --port-base block
BLOCK_COUNT = (PORT_RANGE_END - PORT_RANGE_START) // 100
FREE_PORT_TRIES = 200
MIN_LISTEN_RANGE = 1000  # fewer ports than this outside the ephemeral range: let the OS choose


class PortsBusy(SlurmRlError):
    """A port of an explicit --port-base block is taken on this node."""


def port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("", port))
            return True
        except OSError:
            return False


def bind_first(sock: socket.socket, candidates: Iterable[int]) -> int | None:
    """Bind ``sock`` to the first of these ports that is free and return it; None when none is.
    (A failed bind leaves the socket unbound, so one socket tries them all.)"""
    for port in candidates:
        try:
            sock.bind(("", port))
        except OSError:
            continue
        return port
    return None


def free_port() -> int:
    """A port free right now (bound and released: Ray binds it a moment later)."""
    return free_ports(1)[0]


def ephemeral_range(path: str = "/proc/sys/net/ipv4/ip_local_port_range") -> tuple[int, int]:
    """The kernel's source ports for outgoing connections (Linux's default when unreadable)."""
    try:
        low, high = (int(v) for v in Path(path).read_text().split())
        return low, high
    except (OSError, ValueError):
        return 32768, 60999


def listen_range(ephemeral: tuple[int, int]) -> tuple[int, int] | None:
    """Where free ports are drawn: slurm-rl's range below the ephemeral one, else above it
    (a site that starts the ephemeral range low), else None (the OS chooses)."""
    low, high = ephemeral
    below = (PORT_RANGE_START, min(PORT_RANGE_END, low))
    above = (high + 1, 65536)
    return next((r for r in (below, above) if r[1] - r[0] >= MIN_LISTEN_RANGE), None)


def free_ports(n: int, rng: random.Random | None = None) -> list[int]:
    """``n`` distinct ports free right now, outside the kernel's ephemeral range: between this
    check and Ray's bind a moment later, any outgoing connection on the node could take a port
    of the ephemeral range as its source port, and Ray's daemon would then fail to start. All
    are held bound until the last is drawn (two draws released one by one can return the same
    port, and Ray refuses a port given to two daemons). Ports that are another job's preferred
    GCS port (multiples of 100) are left alone."""
    draw = rng or random.SystemRandom()
    span = listen_range(ephemeral_range())
    candidates = (draw.randrange(*span) for _ in range(FREE_PORT_TRIES)) if span else iter(())
    with contextlib.ExitStack() as held:
        ports: list[int] = []
        while len(ports) < n:
            s = held.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            port = bind_first(s, (p for p in candidates if p % 100 and p not in ports))
            if port is None:
                break
            ports.append(port)
        while len(ports) < n:  # no room outside the ephemeral range, or all taken: the OS chooses
            s = held.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            s.bind(("", 0))
            ports.append(int(s.getsockname()[1]))
        return ports


@dataclass(frozen=True)
class RayPorts:
    """The ports one node's Ray uses; None or 0 means Ray (or the OS) picks."""

    gcs: int | None = None  # head only
    dashboard: int | None = None  # head only
    ray_client_server: int | None = None  # head only, with --ray-client
    dashboard_agent_listen: int | None = None
    node_manager: int = 0
    object_manager: int = 0
    dashboard_agent_grpc: int | None = None
    metrics_export: int | None = None
    runtime_env_agent: int | None = None
    min_worker: int = 0
    max_worker: int = 0

    def as_dict(self) -> dict[str, int | None]:
        return asdict(self)

    def ray_start_args(self) -> list[str]:
        """Port flags shared by `ray start --head` and `ray start --address` (gcs, dashboard and
        Ray Client are the head's own flags)."""
        flags = {
            "node-manager-port": self.node_manager,
            "object-manager-port": self.object_manager,
            "dashboard-agent-listen-port": self.dashboard_agent_listen,
            "dashboard-agent-grpc-port": self.dashboard_agent_grpc,
            "metrics-export-port": self.metrics_export,
            "runtime-env-agent-port": self.runtime_env_agent,
            "min-worker-port": self.min_worker,
            "max-worker-port": self.max_worker,
        }
        return [f"--{k}={v}" for k, v in flags.items() if v is not None]


def preferred_gcs_port(job_id: int) -> int:
    return PORT_RANGE_START + (job_id % BLOCK_COUNT) * 100


def check_port_base(port_base: int) -> None:
    if not 1024 <= port_base <= 65535 - BLOCK_SIZE:
        raise UsageError(
            f"--port-base {port_base}: must be 1024..{65535 - BLOCK_SIZE}; it pins {BLOCK_SIZE} "
            f"ports from there (or leave it out: slurm-rl picks free ports on each node)"
        )


def block(port_base: int, ray_client: bool = False) -> RayPorts:
    """The explicit layout of ``--port-base``: every daemon port pinned, workers left to the OS."""
    check_port_base(port_base)
    b = port_base
    return RayPorts(
        gcs=b,
        dashboard=b + 1,
        ray_client_server=b + 8 if ray_client else None,
        dashboard_agent_listen=b + 2,
        node_manager=b + 3,
        object_manager=b + 4,
        dashboard_agent_grpc=b + 5,
        metrics_export=b + 6,
        runtime_env_agent=b + 7,
    )


def choose_ports(job_id: int, port_base: int | None, head: bool, ray_client: bool = False) -> RayPorts:
    """This node's ports (see the module doc); PortsBusy names a taken port of a --port-base.

    With Ray Client the head also pins its runtime-env agent's port: Ray hands the client proxy
    the agent's address, and an agent port left to Ray reaches the proxy as port 0 (a client's
    ``runtime_env`` then fails)."""
    head_only = ("gcs", "dashboard", "ray_client_server")
    if port_base is not None:
        pinned = block(port_base, ray_client and head)
        for name, port in pinned.as_dict().items():
            if port and (head or name not in head_only) and not port_free(port):
                raise PortsBusy(
                    f"--port-base {port_base}: port {port} ({name}) is already in use on this node; "
                    f"choose another --port-base, or leave it out and slurm-rl picks free ports"
                )
        return pinned if head else RayPorts(**{**pinned.as_dict(), **dict.fromkeys(head_only)})  # type: ignore[arg-type]
    if not head:
        return RayPorts(dashboard_agent_listen=free_port())
    preferred = preferred_gcs_port(job_id)
    drawn = free_ports(5 if ray_client else 3)  # the preferred GCS port is below the OS's range
    gcs = preferred if port_free(preferred) else drawn[2]
    client = {"ray_client_server": drawn[3], "runtime_env_agent": drawn[4]} if ray_client else {}
    return RayPorts(gcs=gcs, dashboard=drawn[0], dashboard_agent_listen=drawn[1], **client)
