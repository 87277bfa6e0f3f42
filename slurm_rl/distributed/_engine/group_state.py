"""A worker group's shared state, at the engine's floor: ``WorkerPlan`` (one per worker: actor
options, its bundle, its tied group's bundle indices), ``GroupSettings`` (the reliability and
dispatch options a group was built with) and ``GroupState`` (what the group's parts share:
the cluster's view, workers, plans, metadata, tied groups, the call tracker, the per-node
initializer pool). Layout (layout.py) fills it; launch (launch.py) creates its workers;
dispatch and reliability work on it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .builder import RayWorkerBuilder
from .calls import CallTracker
from .cluster_view import ClusterView
from .initializer import kill_initializers


@dataclass
class WorkerPlan:
    """How one worker is (re)created: its actor options, placement group and bundle."""

    options: dict[str, Any]  # name, num_cpus, runtime_env (env_vars)
    bundle_indices: tuple[int, list[int]] | None  # (node, bundles) on a tied group's first worker
    placement_group: Any
    bundle: int
    node: int = 0  # logical node (NODE_RANK): the key of its initializer in the group's pool

    @property
    def name(self) -> str:
        return str(self.options["name"])

    @property
    def env_vars(self) -> dict[str, str]:
        return self.options["runtime_env"]["env_vars"]


@dataclass(frozen=True)
class GroupSettings:
    """Reliability and dispatch options of a group (all off by default)."""

    memory_limit_bytes: int | None = None
    restart_on_failure: bool = False
    max_restarts: int = 3
    enable_gradient_compression: bool = False
    async_communication: bool = False
    load_balancing_strategy: str | None = None
    # RayWorkerGroup(env_vars=...): every worker's, above the driver's environment (itself above
    # the class's @ray.remote runtime_env), below the rank variables slurm-rl sets (RANK,
    # MASTER_ADDR, ...) and configure_worker's
    env_vars: dict[str, str] = field(default_factory=dict)


def check_env_vars(env_vars: Any) -> dict[str, str]:
    """RayWorkerGroup's env_vars as a plain dict of strings; ValueError naming the bad entry."""
    if env_vars is None:
        return {}
    if not isinstance(env_vars, Mapping):
        raise ValueError(f"env_vars={env_vars!r}: must be a dict of variable names to string values")
    bad = [k for k, v in env_vars.items() if not isinstance(k, str) or not k or not isinstance(v, str)]
    if bad:
        k = bad[0]
        raise ValueError(
            f"env_vars[{k!r}]={env_vars[k]!r}: names and values must be non-empty strings / strings "
            f"(write str(value)); env_vars reach each worker through Ray's runtime_env"
        )
    return dict(env_vars)


@dataclass
class GroupState:
    """What the group's parts (dispatch, restarts, memory limits, status, balancing) share."""

    cluster: ClusterView
    builder: RayWorkerBuilder
    settings: GroupSettings
    name_prefix: str = ""
    frac: float = 0.0  # GPU share of each worker (colocated groups)
    workers: list[Any] = field(default_factory=list)
    plans: list[WorkerPlan] = field(default_factory=list)
    metadata: list[dict[str, Any]] = field(default_factory=list)
    tied_workers_groups: list[list[int]] = field(default_factory=list)
    worker_to_tied_group_index: dict[int, int] = field(default_factory=dict)
    dp_leader_worker_indices: list[int] = field(default_factory=list)
    tracker: CallTracker = field(default_factory=lambda: CallTracker(0))
    gpu_ids: list[list[Any]] = field(default_factory=list)  # ray.get_gpu_ids() of each, once up
    known_dead: set[int] = field(default_factory=set)
    master_address: str = ""
    master_port: int = 0
    # logical node -> the initializer that creates (and, in another Python, owns) its workers
    initializer_pool: dict[int, Any] = field(default_factory=dict)
    retired_initializers: list[Any] = field(default_factory=list)  # replaced by a restart

    def call(self, worker_id: int, method_name: str, *args: Any, **kwargs: Any) -> Any:
        """One remote call, recorded by the tracker (status, stuck detection)."""
        worker = self.workers[worker_id]
        if not hasattr(worker, method_name):
            raise AttributeError(
                f"worker class has no method {method_name!r} (worker {worker_id}, {self.metadata[worker_id]['name']})"
            )
        ref = getattr(worker, method_name).remote(*args, **kwargs)
        self.tracker.started(worker_id, method_name, ref)
        return ref

    def clear(self) -> None:
        """Forget every worker (after shutdown, or a failed build); kill the initializers."""
        kill_initializers(self.initializer_pool)
        kill_initializers(dict(enumerate(self.retired_initializers)))
        self.retired_initializers = []
        self.workers, self.plans, self.metadata, self.tracker = [], [], [], CallTracker(0)
        self.tied_workers_groups, self.worker_to_tied_group_index, self.dp_leader_worker_indices = [], {}, []
        self.known_dead, self.gpu_ids = set(), []
