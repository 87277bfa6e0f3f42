"""Driver-side API, name for name with NeMo RL's ``nemo_rl.distributed``: switch by changing
the import. The modules at this level are NeMo RL's public paths (facades: thin classes that
keep its surface); ``_engine/`` is what they delegate to (group state, placement, ports,
topology, layout, launch, dispatch, reliability; it never imports a facade); ``worker_env/`` is
what workers run with; ``rollouts/`` is NeMo Gym's pattern. Names here load on first use (PEP 562):
importing this package imports neither torch nor Ray."""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "BatchedDataDict": "batched_data_dict",
    "DynamicBatchingArgs": "batched_data_dict",
    "SequencePackingArgs": "batched_data_dict",
    "ShardingError": "batched_data_dict",
    "SlicedDataDict": "batched_data_dict",
    "NamedSharding": "named_sharding",
    "ACTOR_ENVIRONMENT_REGISTRY": "ray_actor_environment_registry",
    "get_actor_python_env": "ray_actor_environment_registry",
    "init_ray": "virtual_cluster",
    "PY_EXECUTABLES": "virtual_cluster",
    "ClusterConfig": "virtual_cluster",
    "RayVirtualCluster": "virtual_cluster",
    "ResourceInsufficientError": "virtual_cluster",
    "MultiWorkerFuture": "worker_groups",
    "AsyncWorkerResults": "worker_groups",
    "RayWorkerBuilder": "worker_groups",
    "RayWorkerGroup": "worker_groups",
    "WorkerBuildError": "worker_groups",
    "WorkerFailureError": "worker_groups",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])
