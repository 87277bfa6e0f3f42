"""RayVirtualCluster: one Ray placement group per logical node (NeMo RL's ``virtual_cluster``,
name for name). A facade: the class keeps NeMo RL's surface (its private method names too, which
NeMo RL's tests patch) and delegates to the engine (``_engine/placement.py``, ``master_ports.py``,
``topology.py``). The module-level names NeMo RL's code imports from here are here too; the
cluster's probes read them from this module, so patching them here works."""

from __future__ import annotations

import logging
from typing import Any, TypedDict

import ray  # NeMo RL's tests replace ray, the probe and the strategy by these module names
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy
from typing_extensions import NotRequired

from ..core.job_env import LAZY_ENV, Settings  # noqa: F401 - LAZY_ENV importable here as before
from ._engine import placement
from ._engine.addresses import ClusterAddresses
from ._engine.master_ports import MasterPorts, reserve_ports
from ._engine.node_address import *  # noqa: F403 - NeMo RL's names (ports, probes), importable and patchable here
from ._engine.placement import (  # noqa: F401 - importable here as before
    BACKENDS,
    MAX_RETRIES_ENV,
    MAX_RETRIES_ENV_TWIN,
    NOT_STARTED,
    PLACEMENT_GROUP_TIMEOUT_S,
    per_node_slots,
)
from ._engine.placement import max_retries as _max_retries  # noqa: F401
from ._engine.py_executables import make_py_executables, project_root, uv_command
from ._engine.ray_init import (  # noqa: F401 - API.md and NeMo RL 2026: importable here
    RAY_CLUSTER_EXTERNAL,
    RAY_CLUSTER_REUSED_LOCAL,
    RAY_CLUSTER_SLURM_MANAGED,
    RAY_CLUSTER_STARTED_LOCAL,
    _init_ray,
    init_ray,
    local_tag,
    ray_runtime_env_excludes,
    worker_env_vars,
)
from ._engine.topology import *  # noqa: F403 - NeMo RL 2026 imports these from virtual_cluster

logger = logging.getLogger(__name__)

# The driver's uv project and its extras' worker environments (NeMo RL's tests reload this module)
git_root = project_root()
PY_EXECUTABLES: Any = make_py_executables(git_root)


def uv_py_executable(extras: tuple[str, ...] | list[str]) -> str:
    """A ``uv run`` command line over any combination of the project's extras."""
    return uv_command(extras, git_root)


class ClusterConfig(TypedDict):
    gpus_per_node: int
    num_nodes: int
    master_port_range_low: NotRequired[int]  # RayVirtualCluster(port_range_low=...)
    master_port_range_high: NotRequired[int]
    segment_size: NotRequired[int | None]  # nodes per NVLink domain (topology-aware placement)


def _reserve_data_plane_ports(count: int) -> list[int]:
    """``count`` distinct free ports of the data-plane band, read from this module at call time
    (a site or a test may narrow it); see ``reserve_ports``."""
    return reserve_ports(count, DEFAULT_DATA_PLANE_PORT_RANGE_LOW, DEFAULT_DATA_PLANE_PORT_RANGE_HIGH)


class RayVirtualCluster(ClusterAddresses):
    """One Ray placement group per logical node; ``[4, 8, 2]`` is three nodes.

    Options (keyword-only, off by default): ``enable_colocation`` (groups share the bundles:
    ``max_colocated_worker_groups`` becomes 2 unless given), ``gpu_ids`` (pin bundles to
    devices), ``monitor_memory`` (warn when a node runs low), ``communication_backend`` ("nccl"
    or "gloo": what ``slurm_rl.distributed.collective.init_process_group`` uses in workers),
    ``lazy`` (place the groups on first use, as NeMo RL 2026 does; default: the constructor
    places them, as NeMo RL 2025 did; ``SLURM_RL_LAZY_PLACEMENT=1`` or the class attribute
    ``RayVirtualCluster.lazy_placement = True`` switches every cluster), ``part`` (a job of parts:
    every bundle on that part's nodes, docs/parts.md)."""

    lazy_placement = False  # True: every cluster is lazy unless lazy=False is passed

    def __init__(
        self,
        bundle_ct_per_node_list: list[int],
        use_gpus: bool = True,
        max_colocated_worker_groups: int | None = None,
        num_gpus_per_node: int = 8,
        name: str = "",
        placement_group_strategy: str = "STRICT_PACK",
        port_range_low: int | None = None,
        port_range_high: int | None = None,
        segment_size: int | None = None,
        node_resource_constraints: list[dict[str, float]] | None = None,
        *,
        use_unified_pg: bool = False,
        gpu_ids: Any = None,
        enable_colocation: bool = False,
        monitor_memory: bool = False,
        communication_backend: str | None = None,
        lazy: bool | None = None,
        part: str | None = None,
    ) -> None:
        if max_colocated_worker_groups is None:
            max_colocated_worker_groups = 2 if enable_colocation else 1
        node_resource_constraints = on_part(part, bundle_ct_per_node_list, node_resource_constraints)
        placement.check_args(
            bundle_ct_per_node_list, use_gpus, max_colocated_worker_groups, num_gpus_per_node,
            node_resource_constraints, use_unified_pg, gpu_ids, communication_backend,
        )  # fmt: skip
        self.segment_size = segment_size
        self.node_resource_constraints = node_resource_constraints
        self._unified = False  # one placement group holding every bundle (use_unified_pg)
        self._handed_out = False  # get_placement_groups() was called: the layout is in use
        # where MASTER_PORT and get_available_address_and_port pick ports (NeMo RL 2026's defaults)
        self.port_range_low = DEFAULT_MASTER_PORT_RANGE_LOW if port_range_low is None else port_range_low
        self.port_range_high = DEFAULT_MASTER_PORT_RANGE_HIGH if port_range_high is None else port_range_high
        check_port_range(self.port_range_low, self.port_range_high)
        self._master_ports = MasterPorts(self.port_range_low, self.port_range_high)
        self.enable_colocation = enable_colocation
        self.communication_backend = communication_backend
        self.gpu_ids = gpu_ids
        self.bundle_devices: list[list[int]] | None = None
        self._memory_monitor: Any = None
        self._bundle_ct_per_node_list = list(bundle_ct_per_node_list)
        self.use_gpus = use_gpus
        self.max_colocated_worker_groups = max_colocated_worker_groups
        self.num_gpus_per_node = num_gpus_per_node
        self.name = name
        self.placement_group_strategy = placement_group_strategy
        self._node_placement_groups: list[Any] | None = None
        self._sorted_bundle_indices: list[int] | None = None  # bundles in topology order, once placed
        self._nvlink_domain_per_bundle_index: tuple[str, ...] | None = None
        self._shut_down = False
        self._monitor_memory, self._constructing = monitor_memory, False  # _constructing: in __init__'s retries
        if not any(self._bundle_ct_per_node_list):
            self._node_placement_groups = []  # a valid, empty cluster: nothing to place
            return
        if lazy if lazy is not None else (self.lazy_placement or Settings.current().lazy_placement):
            return  # NeMo RL 2026's form: placed on first use (_init_placement_groups, a worker group)
        # NeMo RL 2025's contract (the seed's): the constructor retries _init_placement_groups itself,
        # sleeping 2**n s after the n-th failure, so a test that patches it replaces the allocation
        self._constructing = True
        try:
            make = lambda: self._init_placement_groups(placement_group_strategy, use_unified_pg)  # noqa: E731
            placement.with_retries(make, self._bundle_ct_per_node_list, warn=True)
        finally:
            self._constructing = False

    # ---- creation (engine: _engine/placement.py) ------------------------------------------------
    def _init_placement_groups(self, strategy: str | None = None, use_unified_pg: bool = False) -> list[Any]:
        """The placement groups: those already made (or in the other layout, if asked before a
        worker group used them), else made now: in the constructor one attempt of its retries
        (NeMo RL 2025), elsewhere with the same retries and backoff around each attempt,
        ``_create_placement_groups_internal`` (NeMo RL 2026: a lazy cluster's first use)."""
        if self._node_placement_groups is not None:
            if bool(use_unified_pg) == self._unified or not any(self._bundle_ct_per_node_list):
                return self._node_placement_groups
            self._change_layout(bool(use_unified_pg))

        def attempt() -> list[Any]:
            self._node_placement_groups = self._create_placement_groups_internal(strategy, use_unified_pg)
            self._after_placement()
            return self._node_placement_groups

        if self._constructing:  # one attempt of the constructor's retries
            return attempt()
        return placement.with_retries(attempt, self._bundle_ct_per_node_list, warn=False)

    def _create_placement_groups_internal(self, strategy: str | None = None, use_unified_pg: bool = False) -> list[Any]:
        """One attempt: check the resources, create the placement groups, wait for them."""
        pgs = placement.attempt(
            self._bundle_ct_per_node_list, self.max_colocated_worker_groups, self.use_gpus,
            self.node_resource_constraints, strategy or self.placement_group_strategy,
            bool(use_unified_pg) and not strategy, bool(use_unified_pg), self.name, PLACEMENT_GROUP_TIMEOUT_S,
        )  # fmt: skip
        self._unified = bool(use_unified_pg)
        return pgs

    def _change_layout(self, unified: bool) -> None:
        """The other layout (per node <-> one for all), before any worker group uses them."""
        if self._handed_out:
            raise RuntimeError(
                f"_init_placement_groups(use_unified_pg={unified}): this cluster's placement groups "
                f"({'one for all bundles' if self._unified else 'one per node'}) are already in use by a worker "
                f"group; pass use_unified_pg={unified} to RayVirtualCluster(...) instead"
            )
        placement.remove(self._node_placement_groups or [])
        self._node_placement_groups, self._sorted_bundle_indices = None, None

    def _after_layout(self) -> None:
        """The bundles' topology order for the layout just made (see placement.rank_order)."""
        self._sorted_bundle_indices = placement.rank_order(self._unified, self._get_sorted_bundle_indices, self._pgs())

    def _get_sorted_bundle_indices(self) -> list[int] | None:
        """A unified placement group's bundles in rank order (NeMo RL's name): by topology where
        nodes know it, else by node and device; None for per-node groups."""
        if self._node_placement_groups is None:
            raise ValueError("Placement groups must be initialized before calling _get_sorted_bundle_indices")
        if len(self._node_placement_groups) != 1 or not self._unified:
            return None
        order, _, domains = get_reordered_bundle(
            self._node_placement_groups[0],
            segment_size=self.segment_size,
            gpus_per_node=self.num_gpus_per_node if self.segment_size else None,
        )
        self._nvlink_domain_per_bundle_index = domains
        return placement.check_segment_order(order, domains, self.segment_size)

    def bundle_slots(self) -> list[list[tuple[Any, int]]]:
        """Per logical node (nodes with bundles), its bundles as (placement group, bundle index)
        in rank order: a per-node group's own, or a unified group's in topology order."""
        pgs = self._pgs()
        if not self._unified:
            return per_node_slots(pgs)
        return placement.unified_slots(pgs[0], self._bundle_ct_per_node_list, self._sorted_bundle_indices)

    def _after_placement(self) -> None:
        self._after_layout()
        try:
            self.bundle_devices = placement.pinned_devices(self.gpu_ids, self._bundle_ct_per_node_list, self._pgs())
        except ValueError:
            self.shutdown()
            raise
        if self._monitor_memory and self._memory_monitor is None:
            from ._engine.reliability.memory_monitor import MemoryMonitor

            self._memory_monitor = MemoryMonitor(placement.placed_nodes(self._pgs()))

    @property
    def memory_monitor(self) -> Any:
        """The MemoryMonitor (``monitor_memory=True``): ``.samples`` per node, ``.warnings``."""
        return self._memory_monitor

    def worker_env(self, node: int, bundle: int) -> dict[str, str]:
        """Environment a worker in this bundle gets from the cluster's options."""
        return placement.worker_env(self.bundle_devices, self.communication_backend, node, bundle)

    def get_placement_groups(self) -> list[Any]:
        self._handed_out = True  # a worker group may place actors in them from now on
        return self._pgs()

    def _pgs(self) -> list[Any]:
        if self._node_placement_groups is None and not self._shut_down:
            self._init_placement_groups()  # a lazy cluster's first use
        return [pg for pg in (self._node_placement_groups or []) if pg.bundle_specs]

    def world_size(self) -> int:
        return sum(self._bundle_ct_per_node_list)

    def node_count(self) -> int:
        return sum(1 for n in self._bundle_ct_per_node_list if n > 0)

    @property
    def bundle_ct_per_node_list(self) -> list[int]:
        return list(self._bundle_ct_per_node_list)

    def _ray(self) -> Any:
        return ray

    def _probe_in(self, pg: Any, bundle_idx: int) -> Any:
        """One probe (this module's ``_get_node_ip_and_free_port``) in that bundle."""
        return _get_node_ip_and_free_port.options(
            scheduling_strategy=PlacementGroupSchedulingStrategy(
                placement_group=pg, placement_group_bundle_index=bundle_idx
            ),
            num_cpus=0,  # schedulable even when the bundle's CPUs are taken by workers
        ).remote(self.port_range_low, self.port_range_high)

    def print_cluster_grid(self, worker_group: Any = None) -> None:
        from ._engine.cluster_grid import cluster_grid

        print(cluster_grid(self._bundle_ct_per_node_list, worker_group))

    def print_all_worker_groups(self, worker_groups: list[Any] | None = None) -> None:
        from ._engine.cluster_grid import all_groups_grid

        print(all_groups_grid(self._bundle_ct_per_node_list, worker_groups or []))

    def shutdown(self) -> bool:
        """Remove every placement group; idempotent."""
        if not self._shut_down:
            placement.release(self._node_placement_groups or [], self._master_ports, self._memory_monitor)
        self._node_placement_groups = []
        self._master_ports.ahead = None
        self._shut_down = True
        return True

    def __del__(self) -> None:
        try:
            self.shutdown()
        except Exception:  # noqa: BLE001 - never raise from a finalizer (Ray may be gone)
            pass
