"""RayWorkerBuilder: creates one worker actor in a placement-group bundle, in the driver's
Python environment or an isolated one (see ../shared/API.md)."""

from __future__ import annotations

import importlib
import sys
from dataclasses import dataclass, field
from typing import Any

def import_class(fqn: str) -> type:
    module, _, name = fqn.rpartition(".")
    if not module:
        raise ValueError(f"worker class {fqn!r} is not a fully qualified name like 'package.module.Class'")
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"cannot import worker class {fqn!r}: {exc}") from None


def _configure_in_env(fqn: str, num_gpus: float, bundle_indices: Any) -> Any:
    """Runs inside the worker's Python environment: import the class, ask configure_worker."""
    cls = import_class(fqn)
    configure = getattr(cls, "configure_worker", None)
    return configure(num_gpus, bundle_indices) if configure else None


class _IsolatedWorker:
    """Hosts a worker class imported by name inside its own environment (the driver need not
    import it); methods are called through ``call``. Used for non-SYSTEM environments."""

    def __init__(self, fqn: str, args: tuple, kwargs: dict) -> None:  # type: ignore[type-arg]
        self._obj = import_class(fqn)(*args, **kwargs)

    def call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        return getattr(self._obj, method)(*args, **kwargs)


class _ProxyMethod:
    def __init__(self, actor: Any, name: str) -> None:
        self._actor, self._name = actor, name

    def remote(self, *args: Any, **kwargs: Any) -> Any:
        return self._actor.call.remote(self._name, *args, **kwargs)


class WorkerHandle:
    """``handle.method.remote(...)`` for a worker hosted by _IsolatedWorker."""

    def __init__(self, actor: Any) -> None:
        self.actor = actor

    def __getattr__(self, name: str) -> _ProxyMethod:
        if name.startswith("__"):
            raise AttributeError(name)
        return _ProxyMethod(self.actor, name)


def _actor_of(worker: Any) -> Any:
    return worker.actor if isinstance(worker, WorkerHandle) else worker


@dataclass
class _Plan:
    py_executable: str
    configured: Any = None
    cls: type | None = None
    extra: dict[str, Any] = field(default_factory=dict)


class RayWorkerBuilder:
    """``builder(placement_group, bundle_index, num_gpus, bundle_indices=None, **options)`` -> actor."""

    def __init__(self, ray_actor_class_fqn: str, *args: Any, **kwargs: Any) -> None:
        self.ray_actor_class_fqn = ray_actor_class_fqn
        self.args = args
        self.kwargs = kwargs
        self._actor_classes: dict[type, Any] = {}  # one Ray actor class per worker class, exported once

    def _remote_class(self, cls: type) -> Any:
        import ray

        if cls not in self._actor_classes:
            self._actor_classes[cls] = ray.remote(cls)
        return self._actor_classes[cls]

    def _py_executable(self, extra_options: dict[str, Any]) -> str:
        from .ray_actor_environment_registry import ACTOR_ENVIRONMENT_REGISTRY

        explicit = (extra_options.get("runtime_env") or {}).get("py_executable")
        return explicit or ACTOR_ENVIRONMENT_REGISTRY.get(self.ray_actor_class_fqn, sys.executable)

    def plan(self, num_gpus: float, bundle_indices: Any, extra_options: dict[str, Any]) -> _Plan:
        """Resolve the environment and configure_worker; returns a pending plan (ObjectRef inside
        for other environments, so many workers' plans resolve in parallel)."""
        import ray

        py = self._py_executable(extra_options)
        if py == sys.executable:  # the driver's own environment: importing here is importing there
            cls = import_class(self.ray_actor_class_fqn)
            conf = getattr(cls, "configure_worker", None)
            return _Plan(py, conf(num_gpus, bundle_indices) if conf else None, cls, extra_options)
        task = ray.remote(num_cpus=0)(_configure_in_env).options(runtime_env={"py_executable": py})
        return _Plan(py, task.remote(self.ray_actor_class_fqn, num_gpus, bundle_indices), None, extra_options)

    def create(self, plan: _Plan, placement_group: Any, placement_group_bundle_index: int, num_gpus: float) -> Any:
        import ray
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        configured = ray.get(plan.configured) if isinstance(plan.configured, ray.ObjectRef) else plan.configured
        options = dict(plan.extra)                         # lowest: options passed in
        options.setdefault("num_gpus", num_gpus)
        runtime_env = dict(options.get("runtime_env") or {})
        kwargs = dict(self.kwargs)
        if configured is not None:                          # then what configure_worker says
            resources, env_vars, init_kwargs = configured
            if resources and "num_gpus" in resources:
                options["num_gpus"] = resources["num_gpus"]
            if env_vars:
                runtime_env["env_vars"] = {**runtime_env.get("env_vars", {}), **env_vars}
            kwargs.update(init_kwargs or {})
        if plan.py_executable != sys.executable:
            runtime_env["py_executable"] = plan.py_executable
        options["runtime_env"] = runtime_env
        options["scheduling_strategy"] = PlacementGroupSchedulingStrategy(   # always wins
            placement_group=placement_group, placement_group_bundle_index=placement_group_bundle_index,
            placement_group_capture_child_tasks=True)
        if plan.cls is not None:
            return self._remote_class(plan.cls).options(**options).remote(*self.args, **kwargs)
        actor = self._remote_class(_IsolatedWorker).options(**options).remote(self.ray_actor_class_fqn, self.args, kwargs)
        return WorkerHandle(actor)

    def __call__(self, placement_group: Any, placement_group_bundle_index: int, num_gpus: float,
                 bundle_indices: Any = None, **extra_options: Any) -> Any:
        plan = self.plan(num_gpus, bundle_indices, extra_options)
        return self.create(plan, placement_group, placement_group_bundle_index, num_gpus)
