"""The worker initializer: what turns a worker class and its placement into a running actor
(NeMo RL 2026's ``RayWorkerBuilder.IsolatedWorkerInitializer``), and the per-node pool of them a
``RayWorkerGroup`` keeps (``RayWorkerGroup._initializer_pool``).

An initializer imports the worker class (by name, unless it was given the class), asks its
``configure_worker``, layers the actor options and creates the actor in its bundle. Where it runs
decides in which Python the class is imported and ``configure_worker`` runs:

- workers in the driver's own environment: the driver is their initializer (a
  ``WorkerInitializer`` object in this process). No extra process, and the workers are owned by
  the driver, as plain Ray actors are.
- workers in another environment (``ACTOR_ENVIRONMENT_REGISTRY``, a ``py_executable``, a uv
  environment): one initializer actor per node of the group, started in that environment with no
  CPU, pinned to the node (a uv environment exists on the group's nodes only). The driver never
  imports the class and gets real actor handles back. The workers are owned by that actor, so
  the group keeps it until ``shutdown()``.
"""

from __future__ import annotations

import importlib
import inspect
import sys
from typing import Any

from ..worker_env.hygiene import merge_runtime_env


def import_class(fqn: str) -> Any:
    module, _, name = fqn.rpartition(".")
    if not module:
        raise ValueError(f"worker class {fqn!r} is not a fully qualified name like 'package.module.Class'")
    try:
        obj: Any = importlib.import_module(module)
        for part in name.split("."):
            obj = getattr(obj, part)
        return obj
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"cannot import worker class {fqn!r}: {exc}") from None


def unwrap_actor_class(cls: Any) -> tuple[type, dict[str, Any]]:
    """(the plain Python class, the options of its ``@ray.remote(...)``; {} for a plain class)."""
    plain = getattr(cls, "__ray_actor_class__", None)
    if plain is not None:
        return plain, dict(getattr(cls, "_default_options", None) or {})
    return cls, {}


def class_fqn(cls: Any) -> str:
    plain, _ = unwrap_actor_class(cls)
    return f"{plain.__module__}.{plain.__qualname__}"


def _execute_method(self: Any, method_name: str, *args: Any, **kwargs: Any) -> Any:
    """Call one of this worker's methods by name (NeMo RL 2026: ``w.execute_method.remote("m", x)``)."""
    return getattr(self, method_name)(*args, **kwargs)


def with_execute_method(plain: type) -> type:
    """``plain``, or a subclass of the same name adding ``execute_method`` when it lacks one."""
    if hasattr(plain, "execute_method"):
        return plain
    namespace = {
        "execute_method": _execute_method,
        "__module__": plain.__module__,
        "__qualname__": plain.__qualname__,
        "__doc__": plain.__doc__,
    }
    return type(plain.__name__, (plain,), namespace)


def _accepts(func: Any, name: str) -> bool:
    try:
        params = inspect.signature(func).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.name == name or p.kind is inspect.Parameter.VAR_KEYWORD for p in params)


def configure(cls: Any, num_gpus: float, bundle_indices: Any, num_gpus_per_node: int | None = None) -> tuple[Any, dict]:
    """(configure_worker's answer or None, the class's own @ray.remote options).
    ``num_gpus_per_node`` goes to a configure_worker that takes it (NeMo RL 2026); one written
    for 2025 (``configure_worker(num_gpus, bundle_indices=None)``) is called as before."""
    plain, defaults = unwrap_actor_class(cls)
    conf = getattr(plain, "configure_worker", None)
    if conf is None:
        return None, defaults
    if _accepts(conf, "num_gpus_per_node"):
        return conf(num_gpus, bundle_indices, num_gpus_per_node=num_gpus_per_node), defaults
    return conf(num_gpus, bundle_indices), defaults


def layered_options(
    answer: Any, class_options: dict[str, Any], extra: dict[str, Any], num_gpus: float, kwargs: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(actor options without the scheduling strategy, constructor kwargs). Lowest first: the
    class's ``@ray.remote(...)`` options, the options passed in (``extra``: name, num_cpus,
    runtime_env with the worker's env_vars and py_executable), then configure_worker's answer
    (resources, env_vars, init kwargs, runtime_env overrides)."""
    options = {k: v for k, v in class_options.items() if k != "runtime_env"}
    options.update({k: v for k, v in extra.items() if k != "runtime_env"})
    options.setdefault("num_gpus", num_gpus)
    runtime_env = merge_runtime_env(class_options.get("runtime_env"), extra.get("runtime_env"))
    kwargs = dict(kwargs)
    if answer is not None:
        resources, env_vars, init_kwargs, *more = answer
        if resources and "num_gpus" in resources:
            options["num_gpus"] = resources["num_gpus"]
        runtime_env = merge_runtime_env(runtime_env, {"env_vars": env_vars or {}}, *(more[:1] or [None]))
        kwargs.update(init_kwargs or {})
    if "py_executable" in (extra.get("runtime_env") or {}):  # the environment chosen for the worker wins
        runtime_env["py_executable"] = extra["runtime_env"]["py_executable"]
    options["runtime_env"] = runtime_env
    return options, kwargs


class WorkerInitializer:
    """Creates workers of one class (see the module's docstring). ``ray_actor_class_fqn`` is a
    fully qualified class name, or the class itself (plain or ``@ray.remote``; a class defined
    in the driver's script travels by value)."""

    def __init__(self, ray_actor_class_fqn: Any, *init_args: Any, **init_kwargs: Any) -> None:
        self.ray_actor_class_fqn = ray_actor_class_fqn
        self.init_args = init_args
        self.init_kwargs = init_kwargs
        self._cls: Any = None
        self._remote: Any = None

    def worker_class(self) -> Any:
        if self._cls is None:
            given = self.ray_actor_class_fqn
            self._cls = import_class(given) if isinstance(given, str) else given
        return self._cls

    def _actor_class(self) -> Any:
        """The Ray actor class, made once; a ``@ray.remote`` class is never wrapped twice (its
        plain class is made remote anew, its options come back with every worker's options).
        Every worker gets ``execute_method(name, *args, **kwargs)`` unless its class has one."""
        import ray

        if self._remote is None:
            plain, _ = unwrap_actor_class(self.worker_class())
            self._remote = ray.remote(with_execute_method(plain))
        return self._remote

    def create_worker(
        self,
        placement_group: Any,
        placement_group_bundle_index: int,
        num_gpus: float,
        bundle_indices: Any = None,
        num_gpus_per_node: int | None = None,
        **extra_options: Any,
    ) -> Any:
        """Create one worker in that bundle and return its actor handle (without waiting for
        its ``__init__``). Raises what importing the class or ``configure_worker`` raised."""
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        answer, class_options = configure(self.worker_class(), num_gpus, bundle_indices, num_gpus_per_node)
        options, kwargs = layered_options(answer, class_options, extra_options, num_gpus, self.init_kwargs)
        options["scheduling_strategy"] = PlacementGroupSchedulingStrategy(  # always wins
            placement_group=placement_group,
            placement_group_bundle_index=placement_group_bundle_index,
            placement_group_capture_child_tasks=True,
        )
        return self._actor_class().options(**options).remote(*self.init_args, **kwargs)


_REMOTE_INITIALIZER: Any = None


def remote_initializer_class() -> Any:
    """``WorkerInitializer`` as a Ray actor class (made once per process)."""
    global _REMOTE_INITIALIZER
    if _REMOTE_INITIALIZER is None:
        import ray

        _REMOTE_INITIALIZER = ray.remote(WorkerInitializer)
    return _REMOTE_INITIALIZER


class RemoteInitializerAttribute:
    """``RayWorkerBuilder.IsolatedWorkerInitializer``: NeMo RL's name for the actor class, made
    on first access (importing slurm_rl.distributed does not import Ray)."""

    def __get__(self, obj: Any, owner: Any = None) -> Any:
        return remote_initializer_class()


def is_local(initializer: Any) -> bool:
    return isinstance(initializer, WorkerInitializer)


def bundle_node_id(placement_group: Any, bundle: int) -> str:
    from ray.util.placement_group import placement_group_table

    return str(placement_group_table(placement_group)["bundles_to_node_id"][bundle])


def start_initializer(
    ray_actor_class_fqn: Any, args: tuple, kwargs: dict, py_executable: str, placement_group: Any, bundle: int
) -> Any:
    """The initializer for workers of this class in that Python, on the node of that bundle:
    this process for the driver's own Python, else an actor (no CPU) pinned to the node."""
    if py_executable == sys.executable:
        return WorkerInitializer(ray_actor_class_fqn, *args, **kwargs)
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    return (
        remote_initializer_class()
        .options(
            num_cpus=0,
            runtime_env={"py_executable": py_executable},
            scheduling_strategy=NodeAffinitySchedulingStrategy(bundle_node_id(placement_group, bundle), soft=False),
        )
        .remote(ray_actor_class_fqn, *args, **kwargs)
    )


def alive(initializer: Any, timeout_s: float = 10.0) -> bool:
    """False only for an actor Ray knows dead (the call raises at once); one slower to answer
    than ``timeout_s`` counts as alive (busy, not gone). A local initializer always is."""
    if is_local(initializer):
        return True
    import ray

    try:
        ray.get(initializer.__ray_ready__.remote(), timeout=timeout_s)
    except ray.exceptions.GetTimeoutError:
        return True
    except ray.exceptions.RayActorError:
        return False
    return True


def kill_initializers(pool: dict[int, Any]) -> None:
    """Kill the pool's initializer actors (workers they still own go with them); empty it."""
    import ray

    for initializer in pool.values():
        if not is_local(initializer):
            try:
                ray.kill(initializer)
            except Exception:  # noqa: BLE001 - already gone
                pass
    pool.clear()
