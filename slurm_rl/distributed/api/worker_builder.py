"""RayWorkerBuilder: creates one worker actor in a placement-group bundle, in the driver's
Python environment or an isolated one (NeMo RL's RayWorkerBuilder).

The worker class may be a plain class or a Ray actor class (``@ray.remote`` or
``@ray.remote(...)``, as NeMo RL's workers are): a decorated class is never wrapped a second
time; its own options are the lowest layer, then the options passed in, then what
``configure_worker`` returns, then the placement-group scheduling strategy (always wins).
"""

from __future__ import annotations

import importlib
import sys
from dataclasses import dataclass, field
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


def class_fqn(cls: Any) -> str:
    plain, _ = unwrap_actor_class(cls)
    return f"{plain.__module__}.{plain.__qualname__}"


def configure(cls: Any, num_gpus: float, bundle_indices: Any) -> tuple[Any, dict[str, Any]]:
    """(configure_worker's answer or None, the class's own @ray.remote options)."""
    plain, defaults = unwrap_actor_class(cls)
    conf = getattr(plain, "configure_worker", None)
    return (conf(num_gpus, bundle_indices) if conf else None), defaults


def _configure_in_env(fqn: str, requests: list[tuple[float, Any]]) -> list[Any]:
    """Runs inside the worker's Python environment: import the class, ask configure_worker for
    every worker of a group at once (one process start for the group, not one per worker)."""
    cls = import_class(fqn)
    return [configure(cls, num_gpus, bundle_indices) for num_gpus, bundle_indices in requests]


class _IsolatedWorker:
    """Hosts a worker class imported by name inside its own environment (the driver need not
    import it); methods are called through ``call``. Used for non-SYSTEM environments."""

    def __init__(self, fqn: str, args: tuple, kwargs: dict) -> None:
        plain, _ = unwrap_actor_class(import_class(fqn))
        self._obj = plain(*args, **kwargs)

    def call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        return getattr(self._obj, method)(*args, **kwargs)

    execute_method = call  # NeMo RL 2026's name for the same thing


class _ProxyMethod:
    def __init__(self, actor: Any, name: str) -> None:
        self._actor, self._name = actor, name

    def remote(self, *args: Any, **kwargs: Any) -> Any:
        return self._actor.call.remote(self._name, *args, **kwargs)


class WorkerHandle:
    """``handle.method.remote(...)`` for a worker hosted by _IsolatedWorker."""

    def __init__(self, actor: Any) -> None:
        self.actor = actor

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        if name == "execute_method":  # (method name, *args): the host's own dispatcher
            return self.actor.call
        return _ProxyMethod(self.actor, name)


def _actor_of(worker: Any) -> Any:
    return worker.actor if isinstance(worker, WorkerHandle) else worker


# (Ray job, class, interpreter, requests) -> ObjectRef of the configure answers: a second group of
# the same class in the same environment starts no configure task (no process start).
_CONFIGURED: dict[tuple[Any, ...], Any] = {}


@dataclass
class _Plan:
    py_executable: str
    configured: Any = None  # (configure_worker answer, class options), or an ObjectRef of a list of them
    index: int = 0  # this worker's item in that list
    cls: Any = None  # the class (plain or actor class) in the driver's environment
    extra: dict[str, Any] = field(default_factory=dict)


class RayWorkerBuilder:
    """``builder(placement_group, bundle_index, num_gpus, bundle_indices=None, **options)``
    creates one worker actor. ``ray_actor_class_fqn`` is a fully qualified class name, or the
    class itself (plain or ``@ray.remote``)."""

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
        self._actor_classes: dict[Any, Any] = {}  # one Ray actor class per worker class, exported once
        self._uv_pythons: dict[str, str] = {}  # uv py_executable -> the python of its per-node env

    def prepare(self, placement_groups: list[Any], extra_options: dict[str, Any] | None = None) -> None:
        """Build a uv environment on every node of these placement groups, once per job (see
        uv_envs.py); nothing for other environments."""
        from ..worker_env.uv_envs import is_uv, prepare

        py = self._py_executable(extra_options or {})
        if is_uv(py):
            self._uv_pythons[py] = prepare(py, placement_groups)

    def _remote_class(self, cls: Any) -> Any:
        """The Ray actor class of a worker class, made once. A ``@ray.remote`` class is never
        wrapped twice: its plain class is made remote anew (its options come back with every
        worker's ``.options``). Every worker also gets NeMo RL 2026's ``execute_method(name,
        *args, **kwargs)``, unless its class has its own."""
        import ray

        if cls not in self._actor_classes:
            plain, _ = unwrap_actor_class(cls)
            self._actor_classes[cls] = ray.remote(with_execute_method(plain))
        return self._actor_classes[cls]

    def _py_executable(self, extra_options: dict[str, Any]) -> str:
        from .actor_registry import ACTOR_ENVIRONMENT_REGISTRY

        explicit = (extra_options.get("runtime_env") or {}).get("py_executable")
        return explicit or ACTOR_ENVIRONMENT_REGISTRY.get(self.ray_actor_class_fqn, sys.executable)

    def plan(self, num_gpus: float, bundle_indices: Any, extra_options: dict[str, Any]) -> _Plan:
        """Resolve the environment and configure_worker for one worker (see plan_all)."""
        return self.plan_all([(num_gpus, bundle_indices, extra_options)])[0]

    def plan_all(self, requests: list[tuple[float, Any, dict[str, Any]]]) -> list[_Plan]:
        """Resolve the environment and configure_worker for many workers: in the driver's own
        environment by importing the class here; in another one with a single task there (its
        ObjectRef is resolved when the workers are created). Raises what the import or
        configure_worker raised (in the driver's environment)."""
        import ray

        from ..worker_env.uv_envs import is_uv

        plans: list[_Plan] = []
        isolated: dict[str, list[int]] = {}
        for num_gpus, bundle_indices, extra_options in requests:
            py = self._py_executable(extra_options)
            if is_uv(py):
                if py not in self._uv_pythons:
                    raise RuntimeError(
                        f"{py!r}: the uv environment is not built; call builder.prepare("
                        f"placement_groups) first (RayWorkerGroup does)"
                    )
                py = self._uv_pythons[py]
            if py == sys.executable:  # the driver's own environment: importing here is importing there
                cls = self._given_cls if self._given_cls is not None else import_class(self.ray_actor_class_fqn)
                plans.append(_Plan(py, configure(cls, num_gpus, bundle_indices), cls=cls, extra=extra_options))
            else:
                isolated.setdefault(py, []).append(len(plans))
                plans.append(_Plan(py, extra=extra_options))
        for py, indices in isolated.items():
            asked = [(requests[i][0], requests[i][1]) for i in indices]
            key = (ray.get_runtime_context().get_job_id(), self.ray_actor_class_fqn, py, repr(asked))
            if key not in _CONFIGURED:
                task = ray.remote(num_cpus=0)(_configure_in_env).options(runtime_env={"py_executable": py})
                _CONFIGURED[key] = task.remote(self.ray_actor_class_fqn, asked)
            ref = _CONFIGURED[key]
            for n, i in enumerate(indices):
                plans[i].configured, plans[i].index = ref, n
        return plans

    def options_for(self, plan: _Plan, num_gpus: float) -> tuple[dict[str, Any], dict[str, Any]]:
        """(actor options without the scheduling strategy, constructor kwargs), layered."""
        import ray

        configured = plan.configured
        if isinstance(configured, ray.ObjectRef):
            configured = ray.get(configured)[plan.index]
        answer, class_options = configured
        options = {k: v for k, v in class_options.items() if k != "runtime_env"}  # lowest: @ray.remote(...)
        options.update({k: v for k, v in plan.extra.items() if k != "runtime_env"})  # then options passed in
        options.setdefault("num_gpus", num_gpus)
        runtime_env = merge_runtime_env(class_options.get("runtime_env"), plan.extra.get("runtime_env"))
        kwargs = dict(self.kwargs)
        if answer is not None:  # then configure_worker
            resources, env_vars, init_kwargs, *more = answer
            if resources and "num_gpus" in resources:
                options["num_gpus"] = resources["num_gpus"]
            runtime_env = merge_runtime_env(runtime_env, {"env_vars": env_vars or {}}, *(more[:1] or [None]))
            kwargs.update(init_kwargs or {})
        if plan.py_executable != sys.executable:
            runtime_env["py_executable"] = plan.py_executable
        options["runtime_env"] = runtime_env
        return options, kwargs

    def create(self, plan: _Plan, placement_group: Any, placement_group_bundle_index: int, num_gpus: float) -> Any:
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        options, kwargs = self.options_for(plan, num_gpus)
        options["scheduling_strategy"] = PlacementGroupSchedulingStrategy(  # always wins
            placement_group=placement_group,
            placement_group_bundle_index=placement_group_bundle_index,
            placement_group_capture_child_tasks=True,
        )
        if plan.cls is not None:
            return self._remote_class(plan.cls).options(**options).remote(*self.args, **kwargs)
        actor = (
            self._remote_class(_IsolatedWorker).options(**options).remote(self.ray_actor_class_fqn, self.args, kwargs)
        )
        return WorkerHandle(actor)

    def __call__(
        self,
        placement_group: Any,
        placement_group_bundle_index: int,
        num_gpus: float,
        bundle_indices: Any = None,
        **extra_options: Any,
    ) -> Any:
        self.prepare([placement_group], extra_options)
        plan = self.plan(num_gpus, bundle_indices, extra_options)
        return self.create(plan, placement_group, placement_group_bundle_index, num_gpus)
