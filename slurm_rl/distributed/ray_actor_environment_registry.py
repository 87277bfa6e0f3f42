"""Public path of NeMo RL's ``nemo_rl.distributed.ray_actor_environment_registry``."""

from .api.actor_registry import ACTOR_ENVIRONMENT_REGISTRY, PY_EXECUTABLES, get_actor_python_env

__all__ = ["ACTOR_ENVIRONMENT_REGISTRY", "PY_EXECUTABLES", "get_actor_python_env"]
