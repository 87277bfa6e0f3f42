"""Driver-side API, name for name with NeMo RL's ``nemo_rl.distributed``."""

from .virtual_cluster import init_ray

__all__ = ["init_ray"]
