"""Public path of NeMo RL's ``nemo_rl.distributed.named_sharding`` (implemented in api/)."""

from .api.named_sharding import NamedSharding

__all__ = ["NamedSharding"]
