"""`slurm-rl images list|prune`: the per-node image cache (runtimes/pyxis_image_cache.sh) of a partition's
nodes, read and cleared through SLURM (one short step on every node), never over ssh."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ..config.spec import ClusterSpec
from ..core.errors import UsageError
from ..runtimes import runtime_of
from ..slurm import SlurmClient
from ..slurm.client import step_flags


@dataclass
class NodeReport:
    node: str
    images: list[dict[str, Any]] = field(default_factory=list)  # list: key, image, bytes, last_used, in_use
    removed: list[str] = field(default_factory=list)  # prune
    in_use: list[str] = field(default_factory=list)  # prune: kept, a running container uses them
    freed_bytes: int = 0


def partition_nodes(client: SlurmClient, partition: str | None) -> tuple[str, list[str]]:
    """(partition, its node names); the default partition when None."""
    found = client.partition(partition)
    if found is None:
        known = ", ".join(sorted(client.partitions())) or "none"
        raise UsageError(f"--partition: no partition {partition!r} (this cluster has: {known})")
    return found.name, client.partition_node_names(found.name)


def run_cache_command(
    spec: ClusterSpec, client: SlurmClient, nodes: list[str], action: str, keys: tuple[str, ...] = ()
) -> tuple[list[NodeReport], list[str]]:
    """``action`` (list|prune) on every node; (reports, nodes that did not answer)."""
    argv = runtime_of(spec.container_runtime).image_cache_argv(spec, action, keys)
    res = client.run_on_nodes(None, nodes, argv, timeout_s=120.0, srun_flags=step_flags(spec.account, spec.qos))
    reports = []
    for line in res.stdout.splitlines():
        try:
            item = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(item, dict) and "node" in item:
            reports.append(
                NodeReport(
                    node=item["node"],
                    images=list(item.get("images", [])),
                    removed=list(item.get("removed", [])),
                    in_use=list(item.get("in_use", [])),
                    freed_bytes=int(item.get("freed_bytes", 0)),
                )
            )
    answered = {r.node for r in reports}
    missing = [n for n in nodes if n not in answered]
    if not reports and res.returncode != 0:
        lines = [ln for ln in res.stderr.strip().splitlines() if ln.strip()]
        raise UsageError(f"srun on {','.join(nodes)} failed: {lines[-1] if lines else f'exit {res.returncode}'}")
    return sorted(reports, key=lambda r: r.node), missing


def gigabytes(n: int) -> str:
    return f"{n / 1e9:.2f} GB"
