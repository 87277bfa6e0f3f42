"""Per-job Ray port blocks, so two jobs sharing a node never collide.

Every port Ray opens is pinned inside a block of ``BLOCK_SIZE`` ports derived from the job id
(overridable with ``--port-base``). Blocks live in 10000-31999, below Linux's default ephemeral
range (32768-60999), so outgoing connections never steal them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from .errors import UsageError

PORT_RANGE_START = 10000
PORT_RANGE_END = 32000
BLOCK_SIZE = 100
BLOCK_COUNT = (PORT_RANGE_END - PORT_RANGE_START) // BLOCK_SIZE


@dataclass(frozen=True)
class RayPorts:
    """Every port of one job's Ray cluster (the same on every node of the job)."""

    base: int
    gcs: int
    node_manager: int
    object_manager: int
    dashboard: int
    dashboard_agent_listen: int
    dashboard_agent_grpc: int
    metrics_export: int
    runtime_env_agent: int
    min_worker: int
    max_worker: int

    def as_dict(self) -> dict[str, int]:
        return asdict(self)

    def ray_start_args(self) -> list[str]:
        """Port flags shared by `ray start --head` and `ray start --address`."""
        return [
            f"--node-manager-port={self.node_manager}",
            f"--object-manager-port={self.object_manager}",
            f"--dashboard-agent-listen-port={self.dashboard_agent_listen}",
            f"--dashboard-agent-grpc-port={self.dashboard_agent_grpc}",
            f"--metrics-export-port={self.metrics_export}",
            f"--runtime-env-agent-port={self.runtime_env_agent}",
            f"--min-worker-port={self.min_worker}",
            f"--max-worker-port={self.max_worker}",
        ]


def ports_for(job_id: int, port_base: int | None = None) -> RayPorts:
    """The port block of a job: ``port_base`` if given, else derived from the job id."""
    if port_base is None:
        base = PORT_RANGE_START + (job_id % BLOCK_COUNT) * BLOCK_SIZE
    else:
        if not 1024 <= port_base <= 65535 - BLOCK_SIZE:
            raise UsageError(f"--port-base {port_base}: must be 1024..{65535 - BLOCK_SIZE}; "
                             f"it reserves {BLOCK_SIZE} ports from there")
        base = port_base
    return RayPorts(
        base=base, gcs=base, node_manager=base + 1, object_manager=base + 2, dashboard=base + 3,
        dashboard_agent_listen=base + 4, dashboard_agent_grpc=base + 5, metrics_export=base + 6,
        runtime_env_agent=base + 8,
        min_worker=base + 20, max_worker=base + BLOCK_SIZE - 1,
    )
