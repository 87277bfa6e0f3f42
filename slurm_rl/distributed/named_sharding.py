"""Public path of NeMo RL's ``nemo_rl.distributed.named_sharding`` (implemented in api/)."""

from .api.named_sharding import REPLICATED_AXES, NamedSharding

__all__ = ["REPLICATED_AXES", "NamedSharding"]
