"""Placement groups of a virtual cluster: the argument checks, the bundle of a logical node,
the resource check, one attempt at creating the groups (per node, or one for all), the retry
with backoff that every caller shares, and the bundles' rank order (topology, unified groups).
The public ``RayVirtualCluster`` keeps NeMo RL's method names and calls these."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from typing import Any, TypeVar

from ...core.job_env import MAX_RETRIES_ENV_TWIN, Settings  # noqa: F401 - importable here as before
from ..worker_env.collective import BACKEND_ENV
from . import job_fit
from .cluster_view import Slot, per_node_slots  # noqa: F401 - per_node_slots importable here as before
from .job_fit import JobTooSmallError
from .node_address import NVLINK_DOMAIN_UNKNOWN, TOPO_RANK_UNKNOWN
from .topology import ResourceInsufficientError, _sort_bundle_indices_by_topology, get_ray_cluster_topology

logger = logging.getLogger(__name__)
T = TypeVar("T")

NOT_STARTED = (
    "RayVirtualCluster: this process is not connected to Ray; call slurm_rl.distributed.init_ray() first "
    "(in a slurm-rl job it attaches to the job's Ray cluster, elsewhere it starts a local one), "
    "not ray.init(), which would start a separate cluster outside the job"
)
MAX_RETRIES_ENV = "NRL_VIRTUAL_CLUSTER_MAX_RETRIES"
PLACEMENT_GROUP_TIMEOUT_S = 180.0
BACKENDS = ("nccl", "gloo")


def check_args(
    counts: Any,
    use_gpus: bool,
    colocated: int,
    num_gpus_per_node: Any,
    constraints: list[dict[str, float]] | None,
    use_unified_pg: bool,
    gpu_ids: Any,
    backend: str | None,
) -> None:
    """The constructor's arguments, before anything is placed; one line naming the bad one."""
    # NeMo RL's contract (its tests expect an AssertionError here): raised, not asserted
    if constraints is not None and len(constraints) != len(counts):
        raise AssertionError(
            f"node_resource_constraints length ({len(constraints)}) must match "
            f"bundle_ct_per_node_list length ({len(counts)})"
        )
    if use_unified_pg and gpu_ids is not None:
        raise ValueError("gpu_ids pins bundles node by node; it cannot be combined with use_unified_pg=True")
    if backend is not None and backend not in BACKENDS:
        raise ValueError(f"communication_backend={backend!r}: use 'nccl' (GPUs) or 'gloo'")
    if backend == "nccl" and not use_gpus:
        raise ValueError("communication_backend='nccl' needs GPUs, but use_gpus=False: use 'gloo'")
    if gpu_ids is not None and not use_gpus:
        raise ValueError("gpu_ids needs use_gpus=True (the bundles hold no GPU otherwise)")
    if not isinstance(counts, list) or any(not isinstance(n, int) or isinstance(n, bool) or n < 0 for n in counts):
        raise ValueError(f"bundle_ct_per_node_list must be a list of ints >= 0, got {counts!r}")
    if colocated < 1:
        raise ValueError(f"max_colocated_worker_groups must be >= 1, got {colocated}")
    if not isinstance(num_gpus_per_node, int) or isinstance(num_gpus_per_node, bool) or num_gpus_per_node < 0:
        # workers' configure_worker gets it (0: CPU-only nodes)
        raise ValueError(f"num_gpus_per_node must be an int >= 0 (GPUs on one node), got {num_gpus_per_node!r}")
    if gpu_ids is not None and any(counts):  # an empty cluster places nothing, so pins nothing
        from ..worker_env.gpu_pinning import per_node_ids

        per_node_ids(gpu_ids, counts)  # its shape errors, before anything is placed


def max_retries() -> int:
    raw = os.environ.get(MAX_RETRIES_ENV, Settings.current().max_retries or "6")
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"{MAX_RETRIES_ENV}={raw!r}: must be an integer") from None
    if value <= 0:  # NeMo RL's contract is an AssertionError
        raise AssertionError(f"{MAX_RETRIES_ENV}={value}: must be > 0")
    return value


def with_retries(attempt: Callable[[], T], counts: list[int], warn: bool) -> T:
    """``attempt()`` until it does not raise ResourceInsufficientError, sleeping 2**n s after
    the n-th failure (the last one included: NeMo RL's contract), at most ``max_retries()``
    times; then ResourceInsufficientError naming the bundles and the last shortfall."""
    retries = max_retries()
    last = ""
    for n in range(retries):
        try:
            return attempt()
        except JobTooSmallError:
            raise  # the job's allocation is complete and too small: waiting cannot help
        except ResourceInsufficientError as exc:
            last = str(exc)
            if warn:
                logger.warning("RayVirtualCluster: %s (attempt %d of %d; retrying in %d s)", exc, n + 1, retries, 2**n)
            time.sleep(2**n)
    raise ResourceInsufficientError(
        f"Maximum number of retries ({retries}) reached: the Ray cluster still lacks resources for "
        f"{counts} bundles: {last} (set {MAX_RETRIES_ENV} to wait longer)"
    )


def bundle(colocated: int, use_gpus: bool, constraint: dict[str, float] | None) -> dict[str, float]:
    """One bundle: its CPUs and GPU, and its node's constraint (e.g. ``{"nvlink_domain_X":
    0.001}`` from ``prepare_segment_topology``)."""
    spec: dict[str, float] = {"CPU": colocated, "GPU": 1 if use_gpus else 0}
    if constraint:
        spec.update(constraint)
    return spec


def check_resources(counts: list[int], colocated: int, use_gpus: bool) -> None:
    import ray

    total = sum(counts)
    need = {"CPU": total * colocated, "GPU": total if use_gpus else 0}
    have = ray.cluster_resources()
    short = {k: (v, have.get(k, 0)) for k, v in need.items() if v > have.get(k, 0)}
    if short:
        what = ", ".join(f"{k}: need {n:g}, cluster has {h:g}" for k, (n, h) in short.items())
        raise ResourceInsufficientError(f"not enough resources for the virtual cluster ({what})")


def create(
    node_bundles: list[list[dict[str, float]]], strategy: str, unified: bool, name: str, timeout_s: float
) -> list[Any]:
    """One attempt: the placement groups (one per node with bundles, or one for all), ready,
    or removed and TimeoutError. Logical node 0 (rank 0 of every group) goes to the driver's
    node when it has room: the head, where the driver and its logs are (a soft hint;
    STRICT_PACK groups only)."""
    import ray
    from ray.util.placement_group import placement_group

    if unified:
        flat = [b for bundles in node_bundles for b in bundles]
        pgs = [placement_group(flat, strategy=strategy, name=f"{name}-unified" if name else "")]
    else:
        head = {"_soft_target_node_id": ray.get_runtime_context().get_node_id()} if strategy == "STRICT_PACK" else {}
        pgs = [
            placement_group(
                bundles, strategy=strategy, name=f"{name}-node{i}" if name else "", **(head if i == 0 else {})
            )
            for i, bundles in enumerate(node_bundles)
            if bundles
        ]
    try:
        ray.get([pg.ready() for pg in pgs], timeout=timeout_s)
    except (ray.exceptions.GetTimeoutError, TimeoutError):
        remove(pgs)
        raise TimeoutError(
            f"placement groups for {[len(b) for b in node_bundles]} bundles were not ready within "
            f"{timeout_s:g} s; the cluster may lack resources (ray status shows them)"
        ) from None
    return pgs


def remove(pgs: list[Any]) -> None:
    from ray.util.placement_group import remove_placement_group

    for pg in pgs:
        remove_placement_group(pg)


def unified_slots(pg: Any, counts: list[int], order: list[int] | None) -> list[list[Slot]]:
    """One group of every bundle: taken in rank order (``order``, else as created), node by node."""
    counts = [n for n in counts if n > 0]
    order = order or list(range(sum(counts)))
    slots, start = [], 0
    for n in counts:
        slots.append([(pg, order[i]) for i in range(start, start + n)])
        start += n
    return slots


def topology_order(pgs: list[Any]) -> list[int] | None:
    """The bundles (numbered across the groups, in order) sorted by the topology of the nodes
    they landed on (NeMo RL 2026's ``_sorted_bundle_indices``); None where no node knows its
    topology, or where a stand-in group lacks what Ray's would have (an order nobody asked for
    never fails a cluster)."""
    from ray.util.placement_group import placement_group_table

    try:
        topology = get_ray_cluster_topology()
        data = []
        for pg in pgs:
            placed = placement_group_table(pg)["bundles_to_node_id"]
            for b in range(len(pg.bundle_specs)):
                node = str(placed[b])
                data.append((b, *topology.get(node, (NVLINK_DOMAIN_UNKNOWN, TOPO_RANK_UNKNOWN)), node))
    except Exception as exc:  # noqa: BLE001 - see above
        logger.debug("RayVirtualCluster: no topology order (%s)", exc)
        return None
    if all(d == NVLINK_DOMAIN_UNKNOWN and r == TOPO_RANK_UNKNOWN for _, d, r, _ in data):
        return None
    return _sort_bundle_indices_by_topology(data)


def check_segment_order(order: list[int], domains: tuple[str, ...], segment_size: int | None) -> list[int]:
    """A unified group's topology order must keep every bundle (whole segments only)."""
    if len(order) != len(domains):
        raise ValueError(
            f"the topology order keeps {len(order)} of {len(domains)} bundles: some NVLink domain holds an "
            f"incomplete segment of {segment_size} nodes; pin nodes to whole segments with "
            f"node_resource_constraints (prepare_segment_topology) before making the cluster"
        )
    return order


def placed_nodes(pgs: list[Any]) -> list[str]:
    """The Ray node ids the groups' bundles landed on, each once, in order."""
    from ray.util.placement_group import placement_group_table

    return list(dict.fromkeys(n for pg in pgs for n in placement_group_table(pg)["bundles_to_node_id"].values()))


def release(pgs: list[Any], ports: Any, monitor: Any) -> None:
    """A cluster's shutdown: its memory monitor stopped, the probe running ahead cancelled and
    every placement group removed (where Ray still runs); never raises."""
    if monitor is not None:
        monitor.stop()
    if not pgs:
        return
    try:
        import ray

        if ray.is_initialized():
            ports.cancel()
            remove(pgs)
    except Exception as exc:  # noqa: BLE001 - shutdown must not raise
        logger.warning("RayVirtualCluster.shutdown: %s", exc)


def attempt(
    counts: list[int],
    colocated: int,
    use_gpus: bool,
    constraints: list[dict[str, float]] | None,
    strategy: str,
    default_strategy: bool,
    unified: bool,
    name: str,
    timeout_s: float,
) -> list[Any]:
    """One attempt at a cluster's placement groups: connected to Ray, resources checked, groups
    created and ready. A unified group (every bundle, spread over nodes as Ray finds room) on
    the default strategy gets PACK: STRICT_PACK (one node) would refuse anything bigger."""
    import ray

    if not ray.is_initialized():
        raise RuntimeError(NOT_STARTED)
    job_fit.check(counts, colocated, use_gpus, unified)
    check_resources(counts, colocated, use_gpus)
    if default_strategy and strategy == "STRICT_PACK":
        strategy = "PACK"
    bundles = [
        [bundle(colocated, use_gpus, constraints[i] if constraints else None) for _ in range(n)]
        for i, n in enumerate(counts)
    ]
    return create(bundles, strategy, unified, name, timeout_s)


def rank_order(unified: bool, sorted_unified: Callable[[], list[int] | None], pgs: list[Any]) -> list[int] | None:
    """The bundles' topology order for a layout just made: a unified group's
    (``sorted_unified``; a segment_size its nodes cannot honour is the caller's ValueError), else
    best effort over per-node groups (None on any failure: tests hand in stand-in groups)."""
    try:
        return sorted_unified() if unified else topology_order(pgs)
    except ValueError:
        if unified:
            raise
    except Exception as exc:  # noqa: BLE001 - see above
        logger.debug("RayVirtualCluster: no topology order (%s)", exc)
    return None


def pinned_devices(gpu_ids: Any, counts: list[int], pgs: list[Any]) -> list[list[int]] | None:
    """Per node, per bundle, the GPU each bundle is pinned to (``gpu_ids``; None: unpinned)."""
    if gpu_ids is None:
        return None
    from ..worker_env.gpu_pinning import node_gpu_counts, resolve

    return resolve(gpu_ids, counts, node_gpu_counts(pgs))


def worker_env(devices: list[list[int]] | None, backend: str | None, node: int, bundle: int) -> dict[str, str]:
    """What a worker in this bundle gets from its cluster's options: its pinned GPU, the backend."""
    from ..worker_env.gpu_pinning import pinned_env

    env = pinned_env(devices, node, bundle)
    if backend:
        env[BACKEND_ENV] = backend
    return env
