"""RayWorkerBuilder, RayWorkerGroup, MultiWorkerFuture: create worker actors in a virtual
cluster's placement groups and run methods on them in parallel (NeMo RL's names and shapes)."""

from __future__ import annotations

import importlib
import logging
import sys
import warnings
from dataclasses import dataclass, field
from typing import Any

from .virtual_cluster import RayVirtualCluster

logger = logging.getLogger(__name__)
ONLY_ON = ("all", "tied_leader", "all_tied_workers")


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


class MultiWorkerFuture:
    """Futures of one dispatch; with respect_tied_workers, one result per tied group."""

    def __init__(self, futures: list[Any], used_workers: list[int], respect_tied_workers: bool = True) -> None:
        self.futures = futures
        self.used_workers = used_workers
        self.respect_tied_workers = respect_tied_workers

    def get_results(self, worker_group: RayWorkerGroup) -> list[Any]:
        import ray

        results = ray.get(self.futures)
        if not self.respect_tied_workers:
            return results
        by_worker = dict(zip(self.used_workers, results))
        out = []
        for group in worker_group.tied_workers_groups:
            first = next((w for w in group if w in by_worker), None)
            if first is not None:
                out.append(by_worker[first])
        return out


class RayWorkerGroup:
    """Workers placed on a RayVirtualCluster, with parallel dispatch."""

    def __init__(self, cluster: RayVirtualCluster, remote_worker_builder: RayWorkerBuilder,
                 workers_per_node: int | list[int] | None = None, name_prefix: str = "",
                 bundle_indices_list: list[tuple[int, list[int]]] | None = None) -> None:
        self._cluster = cluster
        self._name_prefix = name_prefix
        self._workers: list[Any] = []
        self._worker_metadata: list[dict[str, Any]] = []
        self.tied_workers_groups: list[list[int]] = []
        self.worker_to_tied_group_index: dict[int, int] = {}
        pgs = cluster.get_placement_groups()
        if not pgs:
            raise ValueError("the virtual cluster has no placement groups (was it shut down?)")
        node_bundles = [len(pg.bundle_specs) for pg in pgs]
        tied = bundle_indices_list if bundle_indices_list is not None else \
            self._single_worker_groups(node_bundles, workers_per_node)
        self._validate_tied(tied, node_bundles)
        self._create(cluster, remote_worker_builder, pgs, tied, bundle_indices_list is not None)

    @staticmethod
    def _single_worker_groups(node_bundles: list[int], workers_per_node: Any) -> list[tuple[int, list[int]]]:
        if workers_per_node is None:
            per_node = list(node_bundles)
        elif isinstance(workers_per_node, int) and not isinstance(workers_per_node, bool):
            per_node = [workers_per_node] * len(node_bundles)
        elif isinstance(workers_per_node, list):
            if len(workers_per_node) != len(node_bundles):
                raise ValueError(f"workers_per_node has {len(workers_per_node)} entries but the cluster has "
                                 f"{len(node_bundles)} nodes")
            per_node = list(workers_per_node)
        else:
            raise ValueError(f"workers_per_node must be None, an int or a list of ints, got {workers_per_node!r}")
        for n, (want, have) in enumerate(zip(per_node, node_bundles)):
            if not isinstance(want, int) or want < 0 or want > have:
                raise ValueError(f"workers_per_node asks for {want!r} workers on node {n}, which has {have} bundles")
        return [(n, [b]) for n, count in enumerate(per_node) for b in range(count)]

    @staticmethod
    def _validate_tied(tied: list[tuple[int, list[int]]], node_bundles: list[int]) -> None:
        for node, bundles in tied:
            if not 0 <= node < len(node_bundles):
                raise ValueError(f"bundle_indices_list names node {node}, but the cluster has {len(node_bundles)} nodes")
            bad = [b for b in bundles if not 0 <= b < node_bundles[node]]
            if bad or not bundles:
                raise ValueError(f"bundle_indices_list: node {node} has bundles 0..{node_bundles[node] - 1}, got {bundles}")

    def _create(self, cluster: RayVirtualCluster, builder: RayWorkerBuilder, pgs: list[Any],
                tied: list[tuple[int, list[int]]], named_groups: bool) -> None:
        import ray

        world = sum(len(b) for _, b in tied)
        addr, port = cluster.get_master_address_and_port()
        self._master_address, self._master_port = addr, port
        frac = 1.0 / cluster.max_colocated_worker_groups if cluster.use_gpus else 0
        plans = []
        rank = 0
        for g, (node, bundles) in enumerate(tied):
            group = []
            for local, bundle in enumerate(bundles):
                name = f"{self._name_prefix}-grp{g}-{local}" if named_groups else f"{self._name_prefix}-{node}-{bundle}"
                # the user's environment comes from init_ray's job-level runtime_env (lowest)
                env = {"RANK": str(rank), "LOCAL_RANK": str(bundle), "WORLD_SIZE": str(world),
                       "MASTER_ADDR": addr, "MASTER_PORT": str(port), "NODE_RANK": str(node)}
                bundle_indices = (node, bundles) if local == 0 else None
                options = {"name": name, "num_cpus": 1, "runtime_env": {"env_vars": env}}
                plans.append((builder.plan(frac, bundle_indices, options), pgs[node], bundle, frac))
                self._worker_metadata.append({"node_idx": node, "local_rank": bundle, "global_rank": rank,
                                              "name": name, "bundle_indices": bundle_indices, "tied_group_idx": g})
                self.worker_to_tied_group_index[rank] = g
                group.append(rank)
                rank += 1
            self.tied_workers_groups.append(group)
        self._workers = [builder.create(plan, pg, bundle, frac) for plan, pg, bundle, frac in plans]
        ray.get([_actor_of(w).__ray_ready__.remote() for w in self._workers])

    # ---- properties --------------------------------------------------------------------------
    @property
    def workers(self) -> list[Any]:
        return self._workers

    @property
    def worker_metadata(self) -> list[dict[str, Any]]:
        return self._worker_metadata

    @property
    def group_count(self) -> int:
        return len(self.tied_workers_groups)

    @property
    def world_size(self) -> int:
        return len(self._workers)

    @property
    def master_address(self) -> str:
        return self._master_address

    @property
    def master_port(self) -> int:
        return self._master_port

    @property
    def cluster(self) -> RayVirtualCluster:
        return self._cluster

    @property
    def name_prefix(self) -> str:
        return self._name_prefix

    # ---- dispatch ----------------------------------------------------------------------------
    def _targets(self, only_on: str) -> list[list[int]]:
        """Worker ids to call, grouped by tied group."""
        if only_on == "all":
            return [[w] for w in range(len(self._workers))]
        if only_on == "tied_leader":
            return [[g[0]] for g in self.tied_workers_groups]
        if only_on == "all_tied_workers":
            return [list(g) for g in self.tied_workers_groups]
        raise ValueError(f"only_on={only_on!r}: use one of {', '.join(ONLY_ON)}")

    def _call(self, worker_id: int, method_name: str, *args: Any, **kwargs: Any) -> Any:
        worker = self._workers[worker_id]
        if not isinstance(worker, WorkerHandle) and not hasattr(worker, method_name):
            raise AttributeError(f"worker class has no method {method_name!r} (worker {worker_id}, "
                                 f"{self._worker_metadata[worker_id]['name']})")
        return getattr(worker, method_name).remote(*args, **kwargs)

    def run_all_workers_single_data(self, method_name: str, *args: Any, only_on: str = "all", **kwargs: Any) -> list[Any]:
        return [self._call(w, method_name, *args, **kwargs) for group in self._targets(only_on) for w in group]

    def run_all_workers_multiple_data(self, method_name: str, data: list[Any], common_kwargs: dict[str, Any] | None = None,
                                      only_on: str = "all") -> MultiWorkerFuture:
        import ray

        from .batched_data_dict import SlicedDataDict

        targets = self._targets(only_on)
        if len(data) > len(targets):
            raise ValueError(f"{len(data)} data items but only {len(targets)} {'workers' if only_on == 'all' else 'tied groups'} "
                             f"to give them to (only_on={only_on!r})")
        if len(data) < len(targets):
            warnings.warn(f"{len(data)} data items for {len(targets)} targets: only the first {len(data)} get work",
                          stacklevel=2)
        if any(not isinstance(d, SlicedDataDict) for d in data):
            warnings.warn("run_all_workers_multiple_data: data items are not SlicedDataDict", stacklevel=2)
        futures, used = [], []
        for item, group in zip(data, targets):
            ref = ray.put(item)  # once per item; every worker of a tied group gets the same reference
            for w in group:
                futures.append(self._call(w, method_name, ref, **(common_kwargs or {})))
                used.append(w)
        return MultiWorkerFuture(futures, used, respect_tied_workers=only_on != "all")

    def get_all_worker_results(self, future: MultiWorkerFuture) -> list[Any]:
        return future.get_results(self)

    # ---- teardown and views ------------------------------------------------------------------
    def shutdown(self, cleanup_method: str | None = None, timeout: float = 30.0, force: bool = False) -> bool:
        import ray

        clean = True
        if cleanup_method and not force and self._workers:
            try:
                ray.get(self.run_all_workers_single_data(cleanup_method), timeout=timeout)
            except Exception as exc:  # noqa: BLE001 - any failure means: fall back to force
                logger.warning("RayWorkerGroup.shutdown: %s failed (%s); killing the workers", cleanup_method, exc)
                clean = False
        for w in self._workers:
            try:
                ray.kill(_actor_of(w))
            except Exception as exc:  # noqa: BLE001
                logger.warning("RayWorkerGroup.shutdown: could not kill a worker: %s", exc)
                clean = False
        self._workers, self._worker_metadata = [], []
        self.tied_workers_groups, self.worker_to_tied_group_index = [], {}
        return clean

    def print_worker_layout(self) -> None:
        self._cluster.print_cluster_grid(self)


__all__ = ["MultiWorkerFuture", "RayWorkerBuilder", "RayWorkerGroup", "WorkerHandle"]
