"""Public path of NeMo RL's ``nemo_rl.distributed.batched_data_dict`` (implemented in api/)."""

from .api.batched_data_dict import (
    BatchedDataDict,
    DynamicBatchingArgs,
    SequencePackingArgs,
    ShardingError,
    SlicedDataDict,
)

__all__ = ["BatchedDataDict", "DynamicBatchingArgs", "SequencePackingArgs", "ShardingError", "SlicedDataDict"]
