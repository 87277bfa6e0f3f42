"""Public path of NeMo RL's ``nemo_rl.distributed.worker_groups`` (implemented in api/)."""

from .api.worker_builder import RayWorkerBuilder
from .api.worker_dispatch import AsyncWorkerResults, MultiWorkerFuture
from .api.worker_group import RayWorkerGroup
from .api.worker_plan import WorkerBuildError
from .reliability.failures import WorkerFailureError

__all__ = [
    "AsyncWorkerResults",
    "MultiWorkerFuture",
    "RayWorkerBuilder",
    "RayWorkerGroup",
    "WorkerBuildError",
    "WorkerFailureError",
]
