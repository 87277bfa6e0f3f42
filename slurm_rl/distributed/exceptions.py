"""The distributed side's errors, in one place (as ``ray.exceptions``): what a driver may want
to catch. Each is also importable from the NeMo RL path that has it."""

from ..data.batched_data_dict import ShardingError
from ._engine.errors import (
    FailedWorker,
    ResourceInsufficientError,
    WorkerBuildError,
    WorkerBuildValueError,
    WorkerFailureError,
)

__all__ = [
    "FailedWorker",
    "ResourceInsufficientError",
    "ShardingError",
    "WorkerBuildError",
    "WorkerBuildValueError",
    "WorkerFailureError",
]
