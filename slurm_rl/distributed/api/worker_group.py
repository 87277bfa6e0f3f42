"""RayWorkerGroup: workers placed on a RayVirtualCluster's bundles, with parallel dispatch
(worker_dispatch.py) and NeMo RL's names and shapes (see ../shared/API.md)."""

from __future__ import annotations

import itertools
import logging
import traceback
from typing import Any

from .named_sharding import NamedSharding
from .virtual_cluster import RayVirtualCluster
from ..reliability.balancing import WorkerBalancing, check_strategy
from .worker_builder import RayWorkerBuilder, WorkerHandle, _actor_of
from .worker_dispatch import AsyncWorkerResults, MultiWorkerFuture, WorkerDispatch
from ..reliability.failures import WorkerFailureError
from ..reliability.health import CallTracker, parse_memory
from ..reliability.restarts import WorkerReliability

logger = logging.getLogger(__name__)
_UNNAMED = itertools.count()


class WorkerBuildError(RuntimeError):
    """A worker could not be created (import error, constructor exception, configure_worker
    error). Names the worker index, its node and the (remote) traceback; the group has removed
    every worker it had created."""

    def __init__(self, index: int, name: str, node: str, cause: BaseException) -> None:
        self.index, self.node, self.cause = index, node, cause
        remote = str(cause) if "Traceback" in str(cause) else "".join(traceback.format_exception(cause))
        super().__init__(f"worker {index} ({name}) on {node} failed to build: {type(cause).__name__}\n{remote}")


class WorkerBuildValueError(WorkerBuildError, ValueError):
    """A WorkerBuildError whose cause is a ValueError (e.g. a class name that does not import):
    ``except ValueError`` keeps catching it, as before."""


def build_error(index: int, name: str, node: str, cause: BaseException) -> WorkerBuildError:
    cls = WorkerBuildValueError if isinstance(cause, ValueError) else WorkerBuildError
    return cls(index, name, node, cause)


def as_builder(worker: Any) -> RayWorkerBuilder:
    """A RayWorkerBuilder, a worker class (plain or @ray.remote), or its fully qualified name."""
    if isinstance(worker, RayWorkerBuilder):
        return worker
    if isinstance(worker, str) or isinstance(worker, type) or hasattr(worker, "__ray_actor_class__"):
        return RayWorkerBuilder(worker)
    raise TypeError(f"RayWorkerGroup needs a RayWorkerBuilder, a worker class or its fully qualified name, got {worker!r}")


def _bundle_node(pg: Any, bundle: int) -> str:
    """``node <ip>`` hosting a placement-group bundle (best effort, for error messages)."""
    try:
        import ray
        from ray.util.placement_group import placement_group_table

        node_id = placement_group_table(pg)["bundles_to_node_id"][bundle]
        ip = next(n["NodeManagerAddress"] for n in ray.nodes() if n["NodeID"] == node_id)
        return f"node {ip}"
    except Exception:  # noqa: BLE001 - a message detail only
        return "an unknown node"


class RayWorkerGroup(WorkerDispatch, WorkerReliability, WorkerBalancing):
    """Workers placed on a RayVirtualCluster, with parallel dispatch.

    Reliability and dispatch options (keyword-only, off by default): ``memory_limit`` ("8GB":
    reserved from Ray for scheduling, and a worker whose resident memory passes it is stopped
    with a WorkerFailureError saying so), ``restart_on_failure``/``max_restarts`` (see
    ``get_results`` and ``restart_failed_workers``), ``enable_gradient_compression`` (fp16
    gradients for models wrapped with ``slurm_rl.distributed.collective.wrap_ddp``),
    ``async_communication`` (``run_all_workers_single_data`` returns an iterator in completion
    order), ``enable_load_balancing``/``load_balancing_strategy`` (``run_balanced``)."""

    def __init__(self, cluster: RayVirtualCluster, remote_worker_builder: Any,
                 workers_per_node: int | list[int] | None = None, name_prefix: str = "",
                 bundle_indices_list: list[tuple[int, list[int]]] | None = None,
                 sharding_annotations: NamedSharding | None = None, *,
                 memory_limit: str | int | None = None, restart_on_failure: bool = False, max_restarts: int = 3,
                 enable_gradient_compression: bool = False, async_communication: bool = False,
                 enable_load_balancing: bool = False, load_balancing_strategy: str | None = None) -> None:
        if not isinstance(max_restarts, int) or max_restarts < 0:
            raise ValueError(f"max_restarts={max_restarts!r}: must be an int >= 0")
        self.memory_limit_bytes = parse_memory(memory_limit) if memory_limit is not None else None
        self.restart_on_failure = bool(restart_on_failure)
        self.max_restarts = max_restarts
        self.enable_gradient_compression = bool(enable_gradient_compression)
        self.async_communication = bool(async_communication)
        self.load_balancing_strategy = check_strategy(enable_load_balancing, load_balancing_strategy)
        self.enable_load_balancing = self.load_balancing_strategy is not None
        self._tracker = CallTracker(0)
        self._known_dead: set[int] = set()
        self._cluster = cluster
        self._name_prefix = name_prefix
        self._workers: list[Any] = []
        self._worker_metadata: list[dict[str, Any]] = []
        self.tied_workers_groups: list[list[int]] = []
        self.worker_to_tied_group_index: dict[int, int] = {}
        self.dp_leader_worker_indices: list[int] = []
        builder = as_builder(remote_worker_builder)
        pgs = cluster.get_placement_groups()
        if not pgs:
            raise ValueError("the virtual cluster has no placement groups (empty, or shut down)")
        node_bundles = [len(pg.bundle_specs) for pg in pgs]
        tied = bundle_indices_list if bundle_indices_list is not None else \
            self._single_worker_groups(node_bundles, workers_per_node)
        self._validate_tied(tied, node_bundles)
        world = sum(len(b) for _, b in tied)
        self.sharding_annotations = self._checked_sharding(sharding_annotations, world)
        self._create(cluster, builder, pgs, tied, bundle_indices_list is not None)

    @staticmethod
    def _checked_sharding(sharding: NamedSharding | None, world: int) -> NamedSharding:
        if sharding is None:
            return NamedSharding(list(range(world)), ["data_parallel"])
        if sorted(int(w) for w in sharding.layout.flatten()) != list(range(world)):
            raise ValueError(f"sharding_annotations {sharding.shape} hold worker ids "
                             f"{sorted(int(w) for w in sharding.layout.flatten())}, but the group has {world} "
                             f"workers (ids 0..{world - 1}); the layout must name each exactly once")
        return sharding

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
        world = sum(len(b) for _, b in tied)
        # Actor names are unique per Ray namespace: groups built without a name_prefix (as the
        # documentation's colocation example builds two) get one from the class and a counter.
        prefix = self._name_prefix or f"{builder.ray_actor_class_fqn.rpartition('.')[2].lower()}{next(_UNNAMED)}"
        addr, port = cluster.get_master_address_and_port()
        self._master_address, self._master_port = addr, port
        frac = 1.0 / cluster.max_colocated_worker_groups if cluster.use_gpus else 0
        plans, rank = [], 0
        for g, (node, bundles) in enumerate(tied):
            group = []
            for local, bundle in enumerate(bundles):
                name = f"{prefix}-grp{g}-{local}" if named_groups else f"{prefix}-{node}-{bundle}"
                # the user's environment comes from init_ray's job-level runtime_env (lowest)
                env = {"RANK": str(rank), "LOCAL_RANK": str(bundle), "WORLD_SIZE": str(world),
                       "MASTER_ADDR": addr, "MASTER_PORT": str(port), "NODE_RANK": str(node),
                       **cluster.worker_env(node, bundle)}
                if self.enable_gradient_compression:
                    env["SLURM_RL_GRADIENT_COMPRESSION"] = "fp16"
                bundle_indices = (node, bundles) if local == 0 else None
                if local == 0:
                    self.dp_leader_worker_indices.append(rank)
                options = {"name": name, "num_cpus": 1, "runtime_env": {"env_vars": env}}
                plans.append((options, bundle_indices, pgs[node], bundle))
                self._worker_metadata.append({"node_idx": node, "local_rank": bundle, "global_rank": rank,
                                              "name": name, "bundle_indices": bundle_indices, "tied_group_idx": g,
                                              "dp_shard_idx": g})
                self.worker_to_tied_group_index[rank] = g
                group.append(rank)
                rank += 1
            self.tied_workers_groups.append(group)
        self._builder, self._plans, self._frac = builder, plans, frac
        try:
            self._reserve_memory([(pg, bundle) for _, _, pg, bundle in plans])
            self._workers = self._build(builder, plans, frac)
            self._tracker = CallTracker(len(self._workers))
            self._watch_memory(list(range(len(self._workers))))
        except BaseException:
            self._release_memory()
            self._worker_metadata, self.tied_workers_groups, self.dp_leader_worker_indices = [], [], []
            self.worker_to_tied_group_index = {}
            raise

    def _build(self, builder: RayWorkerBuilder, plans: list[tuple[Any, ...]], frac: float) -> list[Any]:
        """Create every worker (plans resolve in parallel), wait until each is up; on any failure
        kill what was created and raise WorkerBuildError for the first worker that failed."""
        import ray

        created: list[Any] = []
        current = 0
        try:
            builder.prepare([pg for _, _, pg, _ in plans])
            pending = builder.plan_all([(frac, bundle_indices, options) for options, bundle_indices, _, _ in plans])
            for current, (plan, (_, _, pg, bundle)) in enumerate(zip(pending, plans)):
                created.append(builder.create(plan, pg, bundle, frac))
            ready = [_actor_of(w).__ray_ready__.remote() for w in created]
            for current, ref in enumerate(ready):
                ray.get(ref)
            return created
        except Exception as exc:
            for w in created:
                try:
                    ray.kill(_actor_of(w))
                except Exception:  # noqa: BLE001 - best effort while reporting the real error
                    pass
            _, _, pg, bundle = plans[current]
            raise build_error(current, plans[current][0]["name"], _bundle_node(pg, bundle), exc) from exc

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
    def dp_size(self) -> int:
        """Number of data-parallel shards: one per tied group."""
        return len(self.dp_leader_worker_indices)

    def get_dp_leader_worker_idx(self, dp_shard_idx: int) -> int:
        if not 0 <= dp_shard_idx < len(self.dp_leader_worker_indices):
            raise IndexError(f"dp_shard_idx {dp_shard_idx} out of range 0..{len(self.dp_leader_worker_indices) - 1}")
        return self.dp_leader_worker_indices[dp_shard_idx]

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
        self._release_memory()
        self._workers, self._worker_metadata, self._tracker = [], [], CallTracker(0)
        self.tied_workers_groups, self.worker_to_tied_group_index, self.dp_leader_worker_indices = [], {}, []
        return clean

    def print_worker_layout(self) -> None:
        self._cluster.print_cluster_grid(self)


__all__ = ["AsyncWorkerResults", "MultiWorkerFuture", "RayWorkerBuilder", "RayWorkerGroup", "WorkerBuildError",
           "WorkerFailureError", "WorkerHandle"]
