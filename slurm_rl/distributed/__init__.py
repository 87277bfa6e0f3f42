"""Driver-side API, name for name with NeMo RL's ``nemo_rl.distributed``: switch by changing
the import. Names are loaded on first use (PEP 562): importing one submodule (as every isolated
worker process does) neither imports torch nor Ray's heavier parts."""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "BatchedDataDict": "batched_data_dict", "DynamicBatchingArgs": "batched_data_dict",
    "ShardingError": "batched_data_dict", "SlicedDataDict": "batched_data_dict",
    "NamedSharding": "named_sharding",
    "ACTOR_ENVIRONMENT_REGISTRY": "ray_actor_environment_registry",
    "get_actor_python_env": "ray_actor_environment_registry",
    "init_ray": "ray_init", "PY_EXECUTABLES": "ray_init",
    "ClusterConfig": "virtual_cluster", "RayVirtualCluster": "virtual_cluster",
    "ResourceInsufficientError": "virtual_cluster",
    "MultiWorkerFuture": "worker_groups", "RayWorkerBuilder": "worker_groups", "RayWorkerGroup": "worker_groups",
    "WorkerBuildError": "worker_groups", "WorkerFailureError": "worker_failures",
    "AsyncWorkerResults": "worker_dispatch",
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
