"""ASCII views of a virtual cluster and the worker groups on it (print_cluster_grid & co)."""

from __future__ import annotations

from typing import Any


def _cells(bundles: list[int]) -> list[list[str]]:
    return [[f"{n}.{g}" for g in range(count)] for n, count in enumerate(bundles)]


def _occupants(group: Any) -> dict[tuple[int, int], list[int]]:
    """(node, bundle) -> worker ids, from a group's worker_metadata."""
    where: dict[tuple[int, int], list[int]] = {}
    for wid, meta in enumerate(group.worker_metadata):
        where.setdefault((meta["node_idx"], meta["local_rank"]), []).append(wid)
    return where


def _grid(bundles: list[int], labels: dict[tuple[int, int], str], header: str) -> str:
    width = max([len(c) for row in _cells(bundles) for c in row] + [len(v) for v in labels.values()] + [4]) + 2
    lines = [header]
    for n, count in enumerate(bundles):
        if count == 0:
            continue
        sep = "+" + "+".join("-" * width for _ in range(count)) + "+"
        lines.append(sep)
        lines.append("|" + "|".join(f"{n}.{g}".center(width) for g in range(count)) + f"|  node {n}")
        lines.append("|" + "|".join(labels.get((n, g), "").center(width) for g in range(count)) + "|")
        lines.append(sep)
    return "\n".join(lines)


def cluster_grid(bundles: list[int], group: Any = None) -> str:
    if sum(bundles) == 0:
        return "Empty Ray Cluster (no GPUs)"
    header = f"Ray Cluster: {sum(1 for b in bundles if b)} nodes, {sum(bundles)} GPUs"
    labels: dict[tuple[int, int], str] = {}
    if group is not None:
        header += f", Worker Group: {group.name_prefix} ({group.world_size} workers)"
        labels = {k: ",".join(f"W{w}" for w in ws) for k, ws in _occupants(group).items()}
    return _grid(bundles, labels, header)


def all_groups_grid(bundles: list[int], groups: list[Any]) -> str:
    if sum(bundles) == 0:
        return "Empty Ray Cluster (no GPUs)"
    header = f"Ray Cluster Global View: {sum(1 for b in bundles if b)} nodes, {sum(bundles)} GPUs"
    if groups:
        header += f", Worker Groups: {len(groups)}"
    labels: dict[tuple[int, int], list[str]] = {}
    for gi, group in enumerate(groups):
        for key, ws in _occupants(group).items():
            labels.setdefault(key, []).extend(f"G{gi}:W{w}" for w in ws)
    text = _grid(bundles, {k: " ".join(v) for k, v in labels.items()}, header)
    if groups:
        text += "\nLegend: " + ", ".join(
            f"G{i} = {g.name_prefix} ({g.world_size} workers)" for i, g in enumerate(groups)
        )
    return text
