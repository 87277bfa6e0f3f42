"""Public path of NeMo RL's ``nemo_rl.distributed.ray_actor_environment_registry``."""

from ._engine.actor_registry import ACTOR_ENVIRONMENT_REGISTRY, get_actor_python_env
from .virtual_cluster import PY_EXECUTABLES

__all__ = ["ACTOR_ENVIRONMENT_REGISTRY", "PY_EXECUTABLES", "get_actor_python_env"]
