"""Public path of NeMo RL's ``nemo_rl.distributed.batched_data_dict``. The class is data, not
engine: it lives in ``slurm_rl.data`` (below the distributed engine, which shards with it)."""

from ..data.batched_data_dict import (
    BatchedDataDict,
    DynamicBatchingArgs,
    SequencePackingArgs,
    ShardingError,
    SlicedDataDict,
)

__all__ = ["BatchedDataDict", "DynamicBatchingArgs", "SequencePackingArgs", "ShardingError", "SlicedDataDict"]
