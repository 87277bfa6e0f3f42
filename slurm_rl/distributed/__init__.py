"""Driver-side API, name for name with NeMo RL's ``nemo_rl.distributed``: switch by changing
the import. Ray is imported lazily (importing this package does not start or need Ray)."""

from .batched_data_dict import BatchedDataDict, DynamicBatchingArgs, ShardingError, SlicedDataDict
from .named_sharding import NamedSharding
from .ray_actor_environment_registry import ACTOR_ENVIRONMENT_REGISTRY, get_actor_python_env
from .ray_init import init_ray
from .virtual_cluster import PY_EXECUTABLES, ClusterConfig, RayVirtualCluster, ResourceInsufficientError
from .worker_groups import MultiWorkerFuture, RayWorkerBuilder, RayWorkerGroup, WorkerBuildError

__all__ = [
    "ACTOR_ENVIRONMENT_REGISTRY", "BatchedDataDict", "ClusterConfig", "DynamicBatchingArgs", "MultiWorkerFuture",
    "NamedSharding", "PY_EXECUTABLES", "RayVirtualCluster", "RayWorkerBuilder", "RayWorkerGroup",
    "ResourceInsufficientError", "ShardingError", "SlicedDataDict", "WorkerBuildError", "get_actor_python_env",
    "init_ray",
]
