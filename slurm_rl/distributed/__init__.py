"""Driver-side API, name for name with NeMo RL's ``nemo_rl.distributed``: switch by changing
the import. Four sub-packages: ``api/`` (NeMo RL's classes), ``worker_env/`` (what workers run
with), ``reliability/`` (dead, stuck and growing workers), ``rollouts/`` (NeMo Gym's pattern);
the modules at this level are NeMo RL's public paths. Names here load on first use (PEP 562):
importing this package imports neither torch nor Ray."""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "BatchedDataDict": "api.batched_data_dict",
    "DynamicBatchingArgs": "api.batched_data_dict",
    "SequencePackingArgs": "api.batched_data_dict",
    "ShardingError": "api.batched_data_dict",
    "SlicedDataDict": "api.batched_data_dict",
    "NamedSharding": "api.named_sharding",
    "ACTOR_ENVIRONMENT_REGISTRY": "api.actor_registry",
    "get_actor_python_env": "api.actor_registry",
    "init_ray": "api.ray_init",
    "PY_EXECUTABLES": "api.virtual_cluster",
    "ClusterConfig": "api.virtual_cluster",
    "RayVirtualCluster": "api.virtual_cluster",
    "ResourceInsufficientError": "api.virtual_cluster",
    "MultiWorkerFuture": "api.worker_dispatch",
    "AsyncWorkerResults": "api.worker_dispatch",
    "RayWorkerBuilder": "api.worker_builder",
    "RayWorkerGroup": "api.worker_group",
    "WorkerBuildError": "api.worker_plan",
    "WorkerFailureError": "reliability.failures",
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
