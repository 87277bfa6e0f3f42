"""Which Python environment each worker class runs in (fully qualified class name -> executable)."""

from __future__ import annotations

# Users add their worker classes here (or pass runtime_env={"py_executable": ...} per group).
ACTOR_ENVIRONMENT_REGISTRY: dict[str, str] = {}


def get_actor_python_env(actor_class_fqn: str) -> str:
    """The py_executable registered for ``actor_class_fqn``; ValueError says how to register it."""
    if actor_class_fqn in ACTOR_ENVIRONMENT_REGISTRY:
        return ACTOR_ENVIRONMENT_REGISTRY[actor_class_fqn]
    raise ValueError(
        f"{actor_class_fqn!r} is not in ACTOR_ENVIRONMENT_REGISTRY; register it with "
        f"ACTOR_ENVIRONMENT_REGISTRY[{actor_class_fqn!r}] = PY_EXECUTABLES.SYSTEM (or another "
        f"PY_EXECUTABLES value) in slurm_rl.distributed.ray_actor_environment_registry"
    )


__all__ = ["ACTOR_ENVIRONMENT_REGISTRY", "get_actor_python_env"]
