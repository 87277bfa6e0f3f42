"""Public path of NeMo RL's ``nemo_rl.distributed.named_sharding`` (the engine's own class)."""

from ._engine.named_sharding import REPLICATED_AXES, NamedSharding

__all__ = ["REPLICATED_AXES", "NamedSharding"]
