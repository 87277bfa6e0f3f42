"""``RayVirtualCluster(gpu_ids=...)``: which device each bundle's workers see.

``gpu_ids`` is a list of device ids (the same on every node), a list of such lists (one per
node of the cluster), or ``"auto"`` (bundle j gets device j). An id is the node's own device
number when it is below the node's device count; otherwise it is read as numbered across the
cluster's nodes in order (node 1's first device is id ``gpus on node 0``, as in the
documentation's ``[[0, 1, 2, 3], [4, 5, 6, 7]]`` on 4-GPU nodes) and mapped back to the node's
own number. Anything else is an error naming the node and what it has.

Ray would set ``CUDA_VISIBLE_DEVICES`` from its own GPU assignment; a pinned worker gets the
pinned id instead (and Ray is told not to override it)."""

from __future__ import annotations

from typing import Any


def per_node_ids(gpu_ids: Any, bundles: list[int]) -> list[list[int] | None]:
    """The ids asked for each node (None: "auto", resolved against the node's devices)."""
    nodes = [n for n in bundles if n > 0]
    if gpu_ids == "auto":
        return [None] * len(nodes)
    if not isinstance(gpu_ids, list) or not gpu_ids:
        raise ValueError(f"gpu_ids={gpu_ids!r}: give a list of device ids, a list of lists (one per node) or 'auto'")
    if all(isinstance(i, int) and not isinstance(i, bool) for i in gpu_ids):
        lists = [list(gpu_ids)] * len(nodes)
    elif all(isinstance(x, list) for x in gpu_ids):
        if len(gpu_ids) != len(nodes):
            raise ValueError(
                f"gpu_ids has {len(gpu_ids)} lists but the cluster has {len(nodes)} nodes: give one "
                f"list of device ids per node"
            )
        lists = [list(x) for x in gpu_ids]
    else:
        raise ValueError(f"gpu_ids={gpu_ids!r}: mix of ids and lists; give a list of ids or a list of lists")
    for n, (ids, count) in enumerate(zip(lists, nodes)):
        if len(ids) != count:
            raise ValueError(
                f"gpu_ids for node {n} lists {len(ids)} devices but the node has {count} bundles: "
                f"give one device id per bundle"
            )
        if any(not isinstance(i, int) or isinstance(i, bool) or i < 0 for i in ids) or len(set(ids)) != len(ids):
            raise ValueError(f"gpu_ids for node {n}: {ids} must be distinct device ids >= 0")
    return lists  # type: ignore[return-value]


def resolve(gpu_ids: Any, bundles: list[int], node_gpus: list[int]) -> list[list[int]]:
    """The node's own device for every bundle (node order), validated against each node's
    device count (``node_gpus``, in the same order)."""
    asked = per_node_ids(gpu_ids, bundles)
    if gpu_ids == "auto":
        return resolve_auto(bundles, node_gpus)
    out, offset = [], 0
    for n, (ids, have) in enumerate(zip(asked, node_gpus)):
        assert ids is not None
        if all(i < have for i in ids):
            out.append(ids)
        elif all(offset <= i < offset + have for i in ids):
            out.append([i - offset for i in ids])
        else:
            raise ValueError(
                f"gpu_ids for node {n}: {ids}, but that node has {have} GPU(s) (ids 0..{have - 1}, "
                f"or {offset}..{offset + have - 1} numbered across the cluster)"
            )
        offset += have
    return out


def resolve_auto(bundles: list[int], node_gpus: list[int]) -> list[list[int]]:
    out = []
    for n, (count, have) in enumerate(zip([b for b in bundles if b > 0], node_gpus)):
        if count > have:
            raise ValueError(f"gpu_ids='auto': node {n} has {count} bundles but only {have} GPU(s)")
        out.append(list(range(count)))
    return out


def node_gpu_counts(placement_groups: list[Any]) -> list[int]:
    """GPUs of the node hosting each placement group (Ray's node table)."""
    import ray
    from ray.util.placement_group import placement_group_table

    gpus = {n["NodeID"]: int(n["Resources"].get("GPU", 0)) for n in ray.nodes() if n.get("Alive")}
    return [gpus.get(placement_group_table(pg)["bundles_to_node_id"][0], 0) for pg in placement_groups]


def pinned_env(devices: list[list[int]] | None, node: int, bundle: int) -> dict[str, str]:
    if devices is None:
        return {}
    return {"CUDA_VISIBLE_DEVICES": str(devices[node][bundle]), "RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES": "1"}
