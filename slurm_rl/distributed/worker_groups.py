"""RayWorkerGroup: workers placed on a RayVirtualCluster's bundles (NeMo RL's
``nemo_rl.distributed.worker_groups``, name for name). A facade over the engine: one
``GroupState`` (_engine/group_state.py) that layout fills and launch populates, a
``Dispatcher`` (the ``run_*`` calls), ``Restarts`` and ``MemoryLimits``, ``Status`` and a
``Balancer`` (_engine/reliability/); each method hands its call to its part. The cluster
reaches the engine as a ``ClusterView``, never as the class."""

from __future__ import annotations

import itertools
import logging
from typing import Any

from ._engine.builder import RayWorkerBuilder
from ._engine.cluster_view import ClusterView, StandIn
from ._engine.dispatch import Dispatcher
from ._engine.futures import AsyncWorkerResults, MultiWorkerFuture
from ._engine.group_lifecycle import create_group, shut_down
from ._engine.group_state import GroupSettings, GroupState, check_env_vars
from ._engine.launch import WorkerBuildError
from ._engine.layout import (
    as_builder,
    checked_dp_leaders,
    checked_sharding,
    single_worker_groups,
    validate_tied,
)
from ._engine.reliability.balancing import Balancer, check_strategy
from ._engine.reliability.failures import WorkerFailureError
from ._engine.reliability.health import parse_memory
from ._engine.reliability.memory_limits import MemoryLimits
from ._engine.reliability.restarts import Restarts
from ._engine.reliability.status import DEFAULT_STUCK_TIMEOUT_S, Status
from .named_sharding import NamedSharding
from .virtual_cluster import RayVirtualCluster

__all__ = [
    "AsyncWorkerResults",
    "MultiWorkerFuture",
    "RayWorkerBuilder",
    "RayWorkerGroup",
    "WorkerBuildError",
    "WorkerFailureError",
]

logger = logging.getLogger(__name__)
_UNNAMED = itertools.count()


class RayWorkerGroup:
    """Workers placed on a RayVirtualCluster, with parallel dispatch.

    Reliability and dispatch options (keyword-only, off by default): ``memory_limit`` ("8GB":
    reserved from Ray for scheduling, and a worker whose resident memory passes it is stopped
    with a WorkerFailureError saying so), ``restart_on_failure``/``max_restarts`` (see
    ``get_results`` and ``restart_failed_workers``), ``enable_gradient_compression`` (fp16
    gradients for models wrapped with ``slurm_rl.distributed.collective.wrap_ddp``),
    ``async_communication`` (``run_all_workers_single_data`` returns an iterator in completion
    order), ``enable_load_balancing``/``load_balancing_strategy`` (``run_balanced``).

    ``env_vars`` (NeMo RL 2026): variables every worker gets. Precedence, lowest first (NeMo RL
    2026's): the worker class's ``@ray.remote(runtime_env=...)``, the driver's environment as it
    is when the group is made (launcher variables left out), ``env_vars``, the variables slurm-rl
    sets per worker (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, LOCAL_RANK, NODE_RANK, ...: a
    worker group's wiring is never overridden), then what the class's ``configure_worker``
    returns (it sees the worker's placement).

    ``dp_leader_worker_indices`` (NeMo RL 2026): the ranks that own a data-parallel shard, when
    a shard is coarser than a tied group (several engines serving one replica); an ascending
    subset of the tied groups' first ranks, checked before any worker starts. Default: every
    tied group's first rank."""

    def __init__(
        self,
        cluster: RayVirtualCluster,
        remote_worker_builder: Any,
        workers_per_node: int | list[int] | None = None,
        name_prefix: str = "",
        bundle_indices_list: list[tuple[int, list[int]]] | None = None,
        sharding_annotations: NamedSharding | None = None,
        *,
        memory_limit: str | int | None = None,
        restart_on_failure: bool = False,
        max_restarts: int = 3,
        enable_gradient_compression: bool = False,
        async_communication: bool = False,
        enable_load_balancing: bool = False,
        load_balancing_strategy: str | None = None,
        env_vars: dict[str, str] | None = None,
        dp_leader_worker_indices: list[int] | None = None,
    ) -> None:
        if not isinstance(max_restarts, int) or max_restarts < 0:
            raise ValueError(f"max_restarts={max_restarts!r}: must be an int >= 0")
        strategy = check_strategy(enable_load_balancing, load_balancing_strategy)
        settings = GroupSettings(
            memory_limit_bytes=parse_memory(memory_limit) if memory_limit is not None else None,
            restart_on_failure=bool(restart_on_failure),
            max_restarts=max_restarts,
            enable_gradient_compression=bool(enable_gradient_compression),
            async_communication=bool(async_communication),
            load_balancing_strategy=strategy,
            env_vars=check_env_vars(env_vars),
        )
        builder = as_builder(remote_worker_builder)
        self._cluster = cluster
        view: ClusterView = cluster if isinstance(cluster, RayVirtualCluster) else StandIn(cluster)
        self._state = state = GroupState(cluster=view, builder=builder, settings=settings, name_prefix=name_prefix)
        if not cluster.get_placement_groups():
            raise ValueError("the virtual cluster has no placement groups (empty, or shut down)")
        slots = view.bundle_slots()
        node_bundles = [len(s) for s in slots]
        tied = (
            bundle_indices_list
            if bundle_indices_list is not None
            else single_worker_groups(node_bundles, workers_per_node)
        )
        validate_tied(tied, node_bundles)
        world = sum(len(b) for _, b in tied)
        self.sharding_annotations = checked_sharding(sharding_annotations, world)
        leaders = checked_dp_leaders(dp_leader_worker_indices, tied)
        self._memory = MemoryLimits(state)
        self._restarts = Restarts(state, self._memory)
        self._dispatch = Dispatcher(state, self.sharding_annotations, self._restarts.before_dispatch, owner=self)
        self._status = Status(state)
        self._balancer = Balancer(state, self.get_results)
        create_group(state, self._memory, slots, tied, bundle_indices_list is not None, _UNNAMED)
        state.dp_leader_worker_indices = leaders

    # ---- properties --------------------------------------------------------------------------
    @property
    def workers(self) -> list[Any]:
        return self._state.workers

    @property
    def worker_metadata(self) -> list[dict[str, Any]]:
        return self._state.metadata

    @property
    def tied_workers_groups(self) -> list[list[int]]:
        return self._state.tied_workers_groups

    @property
    def worker_to_tied_group_index(self) -> dict[int, int]:
        return self._state.worker_to_tied_group_index

    @property
    def dp_leader_worker_indices(self) -> list[int]:
        return self._state.dp_leader_worker_indices

    @property
    def group_count(self) -> int:
        return len(self.tied_workers_groups)

    @property
    def world_size(self) -> int:
        return len(self._state.workers)

    @property
    def dp_size(self) -> int:
        """Number of data-parallel shards: one per tied group."""
        return len(self.dp_leader_worker_indices)

    def get_dp_leader_worker_idx(self, dp_shard_idx: int) -> int:
        if not 0 <= dp_shard_idx < len(self.dp_leader_worker_indices):
            raise IndexError(
                f"Data parallel shard index {dp_shard_idx} is out of range. "
                f"Valid range is [0, {len(self.dp_leader_worker_indices) - 1}]"
            )
        return self.dp_leader_worker_indices[dp_shard_idx]

    @property
    def master_address(self) -> str:
        return self._state.master_address

    @property
    def master_port(self) -> int:
        return self._state.master_port

    @property
    def _initializer_pool(self) -> dict[int, Any]:
        """Logical node -> the initializer of its workers (NeMo RL 2026's per-node pool; see
        _engine/initializer.py). Emptied by ``shutdown()``."""
        return self._state.initializer_pool

    @property
    def py_executable(self) -> str:
        """The interpreter this group's workers run in (a uv environment's python, resolved)."""
        return self._state.builder.python_for({})

    @property
    def cluster(self) -> RayVirtualCluster:
        return self._cluster

    @property
    def name_prefix(self) -> str:
        return self._state.name_prefix

    # the options the group was built with
    memory_limit_bytes = property(lambda self: self._state.settings.memory_limit_bytes)
    restart_on_failure = property(lambda self: self._state.settings.restart_on_failure)
    max_restarts = property(lambda self: self._state.settings.max_restarts)
    enable_gradient_compression = property(lambda self: self._state.settings.enable_gradient_compression)
    async_communication = property(lambda self: self._state.settings.async_communication)
    load_balancing_strategy = property(lambda self: self._state.settings.load_balancing_strategy)
    enable_load_balancing = property(lambda self: self._state.settings.load_balancing_strategy is not None)

    # ---- dispatch (_engine/dispatch.py) ------------------------------------------------------
    def run_single_worker_single_data(self, method_name: str, worker_idx: int, *args: Any, **kwargs: Any) -> Any:
        """One call on worker ``worker_idx``; returns its ObjectRef."""
        return self._dispatch.run_single_worker_single_data(method_name, worker_idx, *args, **kwargs)

    def run_all_workers_single_data(
        self,
        method_name: str,
        *args: Any,
        only_on: str = "all",
        run_rank_0_only_axes: list[str] | None = None,
        **kwargs: Any,
    ) -> Any:
        """The same call on every target worker: their ObjectRefs (a list, worker order), or on
        an ``async_communication`` group an AsyncWorkerResults in completion order.
        ``run_rank_0_only_axes`` (NeMo RL 2026) calls only the workers at index 0 of those
        sharding axes; ``only_on`` (tied leaders or groups) is NeMo RL's earlier form."""
        return self._dispatch.run_all_workers_single_data(
            method_name, *args, only_on=only_on, run_rank_0_only_axes=run_rank_0_only_axes, **kwargs
        )

    def run_all_workers_multiple_data(
        self,
        method_name: str,
        data: list[Any] | None = None,
        common_kwargs: dict[str, Any] | None = None,
        only_on: str = "all",
        *,
        run_rank_0_only_axes: list[str] | None = None,
        **per_worker: list[Any],
    ) -> MultiWorkerFuture:
        """One data item per target: ``data`` (a list, an item per worker or tied group) or
        NeMo RL 2026's keyword lists (``values=[...]``, an entry per worker left by
        ``run_rank_0_only_axes``). See ``Dispatcher.run_all_workers_multiple_data``."""
        return self._dispatch.run_all_workers_multiple_data(
            method_name, data, common_kwargs, only_on, run_rank_0_only_axes=run_rank_0_only_axes, **per_worker
        )

    def run_all_workers_sharded_data(self, method_name: str, *args: Any, **kwargs: Any) -> MultiWorkerFuture:
        """Data cut along the sharding axes (see ``Dispatcher.run_all_workers_sharded_data``)."""
        return self._dispatch.run_all_workers_sharded_data(method_name, *args, **kwargs)

    def get_all_worker_results(self, future: MultiWorkerFuture) -> list[Any]:
        if not isinstance(future, MultiWorkerFuture):  # NeMo RL's contract: run_all_workers_single_data
            raise TypeError(  # and run_single_worker_single_data return ObjectRefs, not a future
                f"get_all_worker_results takes what run_all_workers_sharded_data or "
                f"run_all_workers_multiple_data return; this is a {type(future).__name__} of Ray ObjectRefs "
                f"(run_all_workers_single_data's): use ray.get(refs), or group.get_results(refs) to name dead workers"
            )
        return future.get_results(self)

    def run_balanced(self, method_name: str, items: list[Any], **options: Any) -> list[Any]:
        """Items spread over the data-parallel workers (``strategy=``, ``common_kwargs=``; see
        reliability/balancing.py), results in input order."""
        return self._balancer.run_balanced(method_name, items, **options)

    # ---- failures and restarts (reliability/restarts.py) ---------------------------------------
    def get_results(self, refs: Any) -> list[Any]:
        """Block for a ``run_*`` call's results; a dead worker raises WorkerFailureError naming
        it (with ``restart_on_failure``: restart and run the call once more)."""
        return self._restarts.get_results(refs)

    def dead_workers(self) -> list[int]:
        return self._restarts.dead_workers()

    def restart_failed_workers(self) -> list[int]:
        """Recreate dead workers (whole tied groups) with a new rendezvous; see Restarts."""
        return self._restarts.restart_failed_workers()

    # ---- status (reliability/status.py) ---------------------------------------------------------
    def get_worker_status(self) -> list[dict[str, Any]]:
        return self._status.get_worker_status()

    def get_resource_usage(self) -> list[dict[str, Any]]:
        return self._status.get_resource_usage()

    def detect_stuck_workers(self, timeout_s: float = DEFAULT_STUCK_TIMEOUT_S) -> list[dict[str, Any]]:
        return self._status.detect_stuck_workers(timeout_s)

    def print_worker_status(self) -> None:
        self._status.print_worker_status()

    def print_resource_usage(self) -> None:
        self._status.print_resource_usage()

    # ---- teardown and views ------------------------------------------------------------------
    def shutdown(self, cleanup_method: str | None = None, timeout: float = 30.0, force: bool = False) -> bool:
        """Kill every worker (after ``cleanup_method`` on the living ones unless ``force``); False
        when a worker was dead, the cleanup failed or a kill failed."""
        return shut_down(self._state, self._restarts, self._memory, cleanup_method, timeout, force)

    def print_worker_layout(self) -> None:
        self._cluster.print_cluster_grid(self)
