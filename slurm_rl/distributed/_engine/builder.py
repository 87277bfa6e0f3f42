"""RayWorkerBuilder: what a worker group is made of (a worker class, its constructor arguments,
its Python environment) and how one worker is created (NeMo RL's RayWorkerBuilder).

The worker class may be a plain class or a Ray actor class (``@ray.remote`` or
``@ray.remote(...)``, as NeMo RL's workers are): a decorated class is never wrapped a second
time; its own options are the lowest layer, then the options passed in, then what
``configure_worker`` returns, then the placement-group scheduling strategy (always wins). The
creation itself is the initializer's (initializer.py).
"""

from __future__ import annotations

import sys
from typing import Any

from .initializer import (
    RemoteInitializerAttribute,
    class_fqn,
    import_class,
    is_local,
    start_initializer,
    unwrap_actor_class,
    with_execute_method,
)

__all__ = ["RayWorkerBuilder", "class_fqn", "import_class", "unwrap_actor_class", "with_execute_method"]


class RayWorkerBuilder:
    """``builder(placement_group, bundle_index, num_gpus, bundle_indices=None, **options)``
    creates one worker actor. ``ray_actor_class_fqn`` is a fully qualified class name, or the
    class itself (plain or ``@ray.remote``)."""

    IsolatedWorkerInitializer = RemoteInitializerAttribute()

    def __init__(self, ray_actor_class_fqn: Any, *args: Any, **kwargs: Any) -> None:
        if isinstance(ray_actor_class_fqn, str):
            self.ray_actor_class_fqn = ray_actor_class_fqn
            self._given_cls: Any = None
        elif isinstance(ray_actor_class_fqn, type) or hasattr(ray_actor_class_fqn, "__ray_actor_class__"):
            self.ray_actor_class_fqn = class_fqn(ray_actor_class_fqn)
            self._given_cls = ray_actor_class_fqn
        else:
            raise TypeError(
                f"RayWorkerBuilder needs a class or a fully qualified class name, got {ray_actor_class_fqn!r}"
            )
        self.args = args
        self.kwargs = kwargs
        self._uv_pythons: dict[str, str] = {}  # uv py_executable -> the python of its per-node env

    def prepare(self, placement_groups: list[Any], extra_options: dict[str, Any] | None = None) -> None:
        """Build a uv environment on every node of these placement groups, once per job (see
        uv_envs.py); nothing for other environments."""
        from ..worker_env.uv_envs import is_uv, prepare

        py = self._registered_python(extra_options or {})
        if is_uv(py) and py not in self._uv_pythons:
            self._uv_pythons[py] = prepare(py, placement_groups)

    def _registered_python(self, extra_options: dict[str, Any]) -> str:
        from .actor_registry import ACTOR_ENVIRONMENT_REGISTRY

        explicit = (extra_options.get("runtime_env") or {}).get("py_executable")
        return explicit or ACTOR_ENVIRONMENT_REGISTRY.get(self.ray_actor_class_fqn, sys.executable)

    def python_for(self, extra_options: dict[str, Any]) -> str:
        """The interpreter the worker runs in: an explicit ``runtime_env.py_executable``, else
        the class's ``ACTOR_ENVIRONMENT_REGISTRY`` entry (a uv one resolved to the python of the
        environment ``prepare`` built), else the driver's own."""
        from ..worker_env.uv_envs import is_uv

        py = self._registered_python(extra_options)
        if is_uv(py):
            if py not in self._uv_pythons:
                raise RuntimeError(
                    f"{py!r}: the uv environment is not built; call builder.prepare("
                    f"placement_groups) first (RayWorkerGroup does)"
                )
            return self._uv_pythons[py]
        return py

    def worker_options(self, extra_options: dict[str, Any], py_executable: str) -> dict[str, Any]:
        """The options passed to the initializer: ``extra_options`` with the worker's
        interpreter set in its runtime_env when it is not the driver's."""
        options = dict(extra_options)
        if py_executable != sys.executable:
            options["runtime_env"] = {**(options.get("runtime_env") or {}), "py_executable": py_executable}
        return options

    def initializer(self, py_executable: str, placement_group: Any, bundle: int) -> Any:
        """A new initializer for this builder's workers in that Python, on that bundle's node."""
        cls = self._given_cls if self._given_cls is not None else self.ray_actor_class_fqn
        return start_initializer(cls, self.args, self.kwargs, py_executable, placement_group, bundle)

    def create_worker_async(
        self,
        placement_group: Any,
        placement_group_bundle_index: int,
        num_gpus: float,
        bundle_indices: Any = None,
        **extra_options: Any,
    ) -> tuple[Any, Any]:
        """(an ObjectRef of the worker's handle, the initializer that owns it), NeMo RL's form:
        keep the initializer as long as the worker. In the driver's own environment the driver
        owns the worker and the initializer is that in-process object."""
        import ray

        self.prepare([placement_group], extra_options)
        py = self.python_for(extra_options)
        initializer = self.initializer(py, placement_group, placement_group_bundle_index)
        args = (placement_group, placement_group_bundle_index, num_gpus, bundle_indices)
        options = self.worker_options(extra_options, py)
        if is_local(initializer):
            return ray.put(initializer.create_worker(*args, **options)), initializer
        return initializer.create_worker.remote(*args, **options), initializer

    def __call__(
        self,
        placement_group: Any,
        placement_group_bundle_index: int,
        num_gpus: float,
        bundle_indices: Any = None,
        **extra_options: Any,
    ) -> Any:
        import ray

        ref, initializer = self.create_worker_async(
            placement_group, placement_group_bundle_index, num_gpus, bundle_indices, **extra_options
        )
        worker = ray.get(ref)
        if not is_local(initializer):
            worker._RAY_INITIALIZER_ACTOR_REF_TO_AVOID_GC = initializer  # it owns the worker
        return worker
