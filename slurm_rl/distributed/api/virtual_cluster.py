"""RayVirtualCluster: one Ray placement group per logical node (NeMo RL's API, name for name)."""

from __future__ import annotations

import logging
import os
import time
from typing import Any, TypedDict

from typing_extensions import NotRequired

from .node_address import (  # noqa: F401 - NeMo RL's names, importable here; tests patch the probe
    DEFAULT_DATA_PLANE_PORT_RANGE_HIGH,
    DEFAULT_DATA_PLANE_PORT_RANGE_LOW,
    DEFAULT_DYNAMO_CONTROL_PORT_RANGE_HIGH,
    DEFAULT_DYNAMO_CONTROL_PORT_RANGE_LOW,
    DEFAULT_GENERATION_PORT_RANGE_HIGH,
    DEFAULT_GENERATION_PORT_RANGE_LOW,
    DEFAULT_GENERATION_ROUTER_PORT_RANGE_HIGH,
    DEFAULT_GENERATION_ROUTER_PORT_RANGE_LOW,
    DEFAULT_GYM_PORT_RANGE_HIGH,
    DEFAULT_GYM_PORT_RANGE_LOW,
    DEFAULT_MASTER_PORT_RANGE_HIGH,
    DEFAULT_MASTER_PORT_RANGE_LOW,
    DEFAULT_SGLANG_PROMETHEUS_PORT_RANGE_HIGH,
    DEFAULT_SGLANG_PROMETHEUS_PORT_RANGE_LOW,
    DEFAULT_SGLANG_ROUTER_PORT_RANGE_HIGH,
    DEFAULT_SGLANG_ROUTER_PORT_RANGE_LOW,
    DEFAULT_VLLM_PORT_RANGE_LOW,
    DEFAULT_VLLM_PORTS_PER_ENGINE,
    NVLINK_DOMAIN_PREFIX,
    NVLINK_DOMAIN_UNKNOWN,
    TOPO_RANK_KEY,
    TOPO_RANK_UNKNOWN,
    _bind_socket_in_range,
    _get_free_consecutive_ports_local,
    _get_free_port_local,
    _get_node_ip_and_free_port,
    _get_node_ip_and_free_port_impl,
    _get_node_ip_local,
    check_port_range,
)
from .py_executables import make_py_executables, project_root, uv_command
from .ray_init import (  # noqa: F401 - API.md and NeMo RL 2026: importable here
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
from .topology import (  # noqa: F401 - NeMo RL 2026 imports these from virtual_cluster
    ResourceInsufficientError,
    _parse_topology_from_resources,
    _sort_bundle_indices_by_topology,
    get_ray_cluster_topology,
    get_reordered_bundle,
    prepare_segment_topology,
    select_segment_nodes,
)

logger = logging.getLogger(__name__)

# The driver's uv project and the worker environments over its extras, computed here (NeMo RL's
# tests reload this module to see them recomputed for another root)
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


NOT_STARTED = (
    "RayVirtualCluster: this process is not connected to Ray; call slurm_rl.distributed.init_ray() first "
    "(in a slurm-rl job it attaches to the job's Ray cluster, elsewhere it starts a local one), "
    "not ray.init(), which would start a separate cluster outside the job"
)
MAX_RETRIES_ENV = "NRL_VIRTUAL_CLUSTER_MAX_RETRIES"
MAX_RETRIES_ENV_TWIN = "SLURM_RL_VIRTUAL_CLUSTER_MAX_RETRIES"
PLACEMENT_GROUP_TIMEOUT_S = 180.0


def per_node_slots(pgs: list[Any]) -> list[list[tuple[Any, int]]]:
    """One placement group per logical node: node n's bundles are group n's, in order."""
    return [[(pg, b) for b in range(len(pg.bundle_specs))] for pg in pgs]


def _reserve_data_plane_ports(count: int) -> list[int]:
    """``count`` distinct ports of the data-plane band [DEFAULT_DATA_PLANE_PORT_RANGE_LOW, _HIGH),
    each free on this node when chosen (below the kernel's ephemeral range, so no outgoing
    connection takes one before its server binds it); RuntimeError when the band has too few.
    Reads the band from this module at call time (a site or a test may narrow it)."""
    chosen: list[int] = []
    for _ in range(count):
        chosen.append(
            _get_free_port_local(
                DEFAULT_DATA_PLANE_PORT_RANGE_LOW,
                DEFAULT_DATA_PLANE_PORT_RANGE_HIGH,
                max_retries=None,
                excluded_ports=set(chosen),
            )
        )
    return chosen


def _max_retries() -> int:
    raw = os.environ.get(MAX_RETRIES_ENV, os.environ.get(MAX_RETRIES_ENV_TWIN, "6"))
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"{MAX_RETRIES_ENV}={raw!r}: must be an integer") from None
    assert value > 0, f"{MAX_RETRIES_ENV}={value}: must be > 0"
    return value


BACKENDS = ("nccl", "gloo")


class RayVirtualCluster:
    """One Ray placement group per logical node; ``[4, 8, 2]`` is three nodes.

    Options (keyword-only, off by default): ``enable_colocation`` (groups share the bundles:
    ``max_colocated_worker_groups`` becomes 2 unless given), ``gpu_ids`` (pin bundles to
    devices, see gpu_pinning.py), ``monitor_memory`` (warn when a node runs low, see
    memory_monitor.py), ``communication_backend`` ("nccl" or "gloo": what
    ``slurm_rl.distributed.collective.init_process_group`` uses in the workers)."""

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
    ) -> None:
        if node_resource_constraints is not None:
            assert len(node_resource_constraints) == len(bundle_ct_per_node_list), (
                f"node_resource_constraints length ({len(node_resource_constraints)}) must match "
                f"bundle_ct_per_node_list length ({len(bundle_ct_per_node_list)})"
            )
        if use_unified_pg and gpu_ids is not None:
            raise ValueError("gpu_ids pins bundles node by node; it cannot be combined with use_unified_pg=True")
        self.segment_size = segment_size
        self.node_resource_constraints = node_resource_constraints
        self._unified = False  # one placement group holding every bundle (use_unified_pg)
        self._handed_out = False  # get_placement_groups() was called: the layout is in use
        if max_colocated_worker_groups is None:
            max_colocated_worker_groups = 2 if enable_colocation else 1
        if communication_backend is not None and communication_backend not in BACKENDS:
            raise ValueError(f"communication_backend={communication_backend!r}: use 'nccl' (GPUs) or 'gloo'")
        if communication_backend == "nccl" and not use_gpus:
            raise ValueError("communication_backend='nccl' needs GPUs, but use_gpus=False: use 'gloo'")
        if gpu_ids is not None and not use_gpus:
            raise ValueError("gpu_ids needs use_gpus=True (the bundles hold no GPU otherwise)")
        # where MASTER_PORT and get_available_address_and_port pick ports (NeMo RL 2026's defaults)
        self.port_range_low = DEFAULT_MASTER_PORT_RANGE_LOW if port_range_low is None else port_range_low
        self.port_range_high = DEFAULT_MASTER_PORT_RANGE_HIGH if port_range_high is None else port_range_high
        check_port_range(self.port_range_low, self.port_range_high)
        self._allocated_master_ports: set[int] = set()
        self.enable_colocation = enable_colocation
        self.communication_backend = communication_backend
        self.gpu_ids = gpu_ids
        self.bundle_devices: list[list[int]] | None = None
        self._memory_monitor: Any = None
        if not isinstance(bundle_ct_per_node_list, list) or any(
            not isinstance(n, int) or isinstance(n, bool) or n < 0 for n in bundle_ct_per_node_list
        ):
            raise ValueError(f"bundle_ct_per_node_list must be a list of ints >= 0, got {bundle_ct_per_node_list!r}")
        if max_colocated_worker_groups < 1:
            raise ValueError(f"max_colocated_worker_groups must be >= 1, got {max_colocated_worker_groups}")
        if not isinstance(num_gpus_per_node, int) or isinstance(num_gpus_per_node, bool) or num_gpus_per_node < 0:
            # workers' configure_worker gets it (0: CPU-only nodes)
            raise ValueError(f"num_gpus_per_node must be an int >= 0 (GPUs on one node), got {num_gpus_per_node!r}")
        self._bundle_ct_per_node_list = list(bundle_ct_per_node_list)
        self.use_gpus = use_gpus
        self.max_colocated_worker_groups = max_colocated_worker_groups
        self.num_gpus_per_node = num_gpus_per_node
        self.name = name
        self.placement_group_strategy = placement_group_strategy
        self._node_placement_groups: list[Any] | None = None
        self._constructing = False  # True while the constructor makes its attempts
        self._sorted_bundle_indices: list[int] | None = None  # bundles in topology order, once placed
        self._nvlink_domain_per_bundle_index: tuple[str, ...] | None = None
        self._next_probe: Any = None  # the master address/port probe starts when first asked for
        self._shut_down = False
        if not any(self._bundle_ct_per_node_list):
            self._node_placement_groups = []  # a valid, empty cluster: nothing to place
            return
        if gpu_ids is not None:
            from ..worker_env.gpu_pinning import per_node_ids

            per_node_ids(gpu_ids, self._bundle_ct_per_node_list)  # shape errors before anything is placed
        retries = _max_retries()
        last = ""
        for attempt in range(retries):
            try:
                self._constructing = True
                try:
                    if use_unified_pg:
                        self._node_placement_groups = self._init_placement_groups(placement_group_strategy, True)
                    else:  # the call NeMo RL's first API made (tests patch it by that contract)
                        self._node_placement_groups = self._init_placement_groups(placement_group_strategy)
                finally:
                    self._constructing = False
                self._after_placement(monitor_memory)
                return
            except ResourceInsufficientError as exc:
                last = str(exc)
                logger.warning(
                    "RayVirtualCluster: %s (attempt %d of %d; retrying in %d s)", exc, attempt + 1, retries, 2**attempt
                )
                time.sleep(2**attempt)  # after every failed attempt, the last one included
        raise ResourceInsufficientError(
            f"Maximum number of retries ({retries}) reached: the Ray cluster still lacks resources for "
            f"{self._bundle_ct_per_node_list} bundles: {last} (set {MAX_RETRIES_ENV} to wait longer)"
        )

    # ---- creation ----------------------------------------------------------------------------
    def _bundle(self, node: int) -> dict[str, float]:
        """One bundle of logical node ``node``: its CPUs and GPU, and the node's constraint (e.g.
        ``{"nvlink_domain_X": 0.001}`` from ``prepare_segment_topology``)."""
        bundle: dict[str, float] = {"CPU": self.max_colocated_worker_groups, "GPU": 1 if self.use_gpus else 0}
        if self.node_resource_constraints and self.node_resource_constraints[node]:
            bundle.update(self.node_resource_constraints[node])
        return bundle

    def _check_resources(self) -> None:
        import ray

        total = sum(self._bundle_ct_per_node_list)
        need = {"CPU": total * self.max_colocated_worker_groups, "GPU": total if self.use_gpus else 0}
        have = ray.cluster_resources()
        short = {k: (v, have.get(k, 0)) for k, v in need.items() if v > have.get(k, 0)}
        if short:
            what = ", ".join(f"{k}: need {n:g}, cluster has {h:g}" for k, (n, h) in short.items())
            raise ResourceInsufficientError(f"not enough resources for the virtual cluster ({what})")

    def _init_placement_groups(self, strategy: str | None = None, use_unified_pg: bool = False) -> list[Any]:
        """The cluster's placement groups, created now if they are not yet.

        The constructor calls this once per attempt and sleeps between attempts, as NeMo RL's
        first API did (tests patch it by that contract); a direct call (NeMo RL 2026's form)
        retries by itself, the same number of times with the same backoff, each attempt
        ``_create_placement_groups_internal``."""
        if self._constructing:
            return self._create_placement_groups_internal(strategy, use_unified_pg)
        if self._node_placement_groups is not None:
            if bool(use_unified_pg) == self._unified or not any(self._bundle_ct_per_node_list):
                return self._node_placement_groups
            self._change_layout(bool(use_unified_pg))
        retries = _max_retries()
        last = ""
        for attempt in range(retries):
            try:
                self._node_placement_groups = self._create_placement_groups_internal(strategy, use_unified_pg)
                self._after_layout()
                return self._node_placement_groups
            except ResourceInsufficientError as exc:
                last = str(exc)
                time.sleep(2**attempt)
        raise ResourceInsufficientError(
            f"Maximum number of retries ({retries}) reached: the Ray cluster still lacks resources for "
            f"{self._bundle_ct_per_node_list} bundles: {last} (set {MAX_RETRIES_ENV} to wait longer)"
        )

    def _create_placement_groups_internal(self, strategy: str | None = None, use_unified_pg: bool = False) -> list[Any]:
        """One attempt: check the resources, create one placement group per node, wait for them."""
        import ray
        from ray.util.placement_group import placement_group, remove_placement_group

        if not ray.is_initialized():
            raise RuntimeError(NOT_STARTED)
        self._check_resources()
        if use_unified_pg:
            # one group of every bundle, spread over nodes as Ray finds room: STRICT_PACK (one
            # node) would refuse anything bigger than a node, so the default becomes PACK
            if strategy is None:
                strategy = "PACK" if self.placement_group_strategy == "STRICT_PACK" else self.placement_group_strategy
            bundles = [self._bundle(i) for i, n in enumerate(self._bundle_ct_per_node_list) for _ in range(n)]
            pgs = [placement_group(bundles, strategy=strategy, name=f"{self.name}-unified" if self.name else "")]
        else:
            strategy = strategy or self.placement_group_strategy
            # Logical node 0 (rank 0 of every group) goes to the driver's node when it has room:
            # the head, where the driver and its logs are (a soft hint; STRICT_PACK groups only).
            head = (
                {"_soft_target_node_id": ray.get_runtime_context().get_node_id()} if strategy == "STRICT_PACK" else {}
            )
            pgs = [
                placement_group(
                    [self._bundle(i) for _ in range(n)],
                    strategy=strategy,
                    name=f"{self.name}-node{i}" if self.name else "",
                    **(head if i == 0 else {}),
                )
                for i, n in enumerate(self._bundle_ct_per_node_list)
                if n > 0
            ]
        try:
            ray.get([pg.ready() for pg in pgs], timeout=PLACEMENT_GROUP_TIMEOUT_S)
        except (ray.exceptions.GetTimeoutError, TimeoutError):
            for pg in pgs:
                remove_placement_group(pg)
            raise TimeoutError(
                f"placement groups for {self._bundle_ct_per_node_list} bundles were not ready within "
                f"{PLACEMENT_GROUP_TIMEOUT_S:g} s; the cluster may lack resources (ray status shows them)"
            ) from None
        self._unified = bool(use_unified_pg)
        return pgs

    def _change_layout(self, unified: bool) -> None:
        """Replace the placement groups by the other layout (one per node <-> one for all),
        before any worker group uses them."""
        from ray.util.placement_group import remove_placement_group

        if self._handed_out:
            raise RuntimeError(
                f"_init_placement_groups(use_unified_pg={unified}): this cluster's placement groups "
                f"({'one for all bundles' if self._unified else 'one per node'}) are already in use by a worker "
                f"group; pass use_unified_pg={unified} to RayVirtualCluster(...) instead"
            )
        for pg in self._node_placement_groups or []:
            remove_placement_group(pg)
        self._node_placement_groups, self._sorted_bundle_indices = None, None

    def _after_layout(self) -> None:
        """The bundles' topology order for the layout just made: best effort for per-node groups
        (an order nobody asked for never fails a cluster; tests hand in stand-in groups); for a
        unified group a segment_size its nodes cannot honour is the caller's ValueError."""
        try:
            self._sorted_bundle_indices = (
                self._get_sorted_bundle_indices() if self._unified else self._topology_order(self._pgs())
            )
        except ValueError:
            if self._unified:
                raise
        except Exception as exc:  # noqa: BLE001 - see above
            logger.debug("RayVirtualCluster: no topology order (%s)", exc)

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
        if len(order) != len(domains):
            raise ValueError(
                f"the topology order keeps {len(order)} of {len(domains)} bundles: some NVLink domain holds an "
                f"incomplete segment of {self.segment_size} nodes; pin nodes to whole segments with "
                f"node_resource_constraints (prepare_segment_topology) before making the cluster"
            )
        return order

    def bundle_slots(self) -> list[list[tuple[Any, int]]]:
        """Per logical node (nodes with bundles), its bundles as (placement group, bundle index)
        in rank order. One placement group per node: that group's bundles. A unified group:
        the bundles taken in topology order (``_sorted_bundle_indices``), node by node."""
        pgs = self._pgs()
        if not self._unified:
            return per_node_slots(pgs)
        counts = [n for n in self._bundle_ct_per_node_list if n > 0]
        order = self._sorted_bundle_indices or list(range(sum(counts)))
        slots, start = [], 0
        for n in counts:
            slots.append([(pgs[0], order[i]) for i in range(start, start + n)])
            start += n
        return slots

    def _after_placement(self, monitor_memory: bool) -> None:
        from ray.util.placement_group import placement_group_table

        self._after_layout()
        pgs = self._pgs()
        if self.gpu_ids is not None:
            from ..worker_env.gpu_pinning import node_gpu_counts, resolve

            try:
                self.bundle_devices = resolve(self.gpu_ids, self._bundle_ct_per_node_list, node_gpu_counts(pgs))
            except ValueError:
                self.shutdown()
                raise
        if monitor_memory:
            from ..reliability.memory_monitor import MemoryMonitor

            nodes = list(
                dict.fromkeys(n for pg in pgs for n in placement_group_table(pg)["bundles_to_node_id"].values())
            )
            self._memory_monitor = MemoryMonitor(nodes)

    @staticmethod
    def _topology_order(pgs: list[Any]) -> list[int] | None:
        """The cluster's bundles (numbered across its placement groups, in order) sorted by the
        topology of the nodes they landed on (NeMo RL 2026's ``_sorted_bundle_indices``); None
        where no node knows its topology."""
        from ray.util.placement_group import placement_group_table

        try:  # best effort: an order nobody asked for never fails a cluster (tests hand in stand-in groups)
            topology = get_ray_cluster_topology()
            data = []
            for pg in pgs:
                placed = placement_group_table(pg)["bundles_to_node_id"]
                for bundle in range(len(pg.bundle_specs)):
                    node = str(placed[bundle])
                    data.append((bundle, *topology.get(node, (NVLINK_DOMAIN_UNKNOWN, TOPO_RANK_UNKNOWN)), node))
        except Exception as exc:  # noqa: BLE001 - whatever a stand-in group lacks, there is no order
            logger.debug("RayVirtualCluster: no topology order (%s)", exc)
            return None
        if all(d == NVLINK_DOMAIN_UNKNOWN and r == TOPO_RANK_UNKNOWN for _, d, r, _ in data):
            return None
        return _sort_bundle_indices_by_topology(data)

    @property
    def memory_monitor(self) -> Any:
        """The MemoryMonitor (``monitor_memory=True``): ``.samples`` per node, ``.warnings``."""
        return self._memory_monitor

    def worker_env(self, node: int, bundle: int) -> dict[str, str]:
        """Environment a worker in this bundle gets from the cluster's options."""
        from ..worker_env.gpu_pinning import pinned_env

        env = pinned_env(self.bundle_devices, node, bundle)
        if self.communication_backend:
            env["SLURM_RL_COMM_BACKEND"] = self.communication_backend
        return env

    # ---- queries -----------------------------------------------------------------------------
    def get_placement_groups(self) -> list[Any]:
        self._handed_out = True  # a worker group may place actors in them from now on
        return self._pgs()

    def _pgs(self) -> list[Any]:
        return [pg for pg in (self._node_placement_groups or []) if pg.bundle_specs]

    def world_size(self) -> int:
        return sum(self._bundle_ct_per_node_list)

    def node_count(self) -> int:
        return sum(1 for n in self._bundle_ct_per_node_list if n > 0)

    @property
    def bundle_ct_per_node_list(self) -> list[int]:
        return list(self._bundle_ct_per_node_list)

    def _probe(self, pg_idx: int = 0, bundle_idx: int = 0) -> Any:
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        pgs = self._pgs()
        if not pgs:
            raise RuntimeError("No valid placement groups found to get available address and port")
        pg = pgs[0] if len(pgs) == 1 else pgs[pg_idx]
        return _get_node_ip_and_free_port.options(
            scheduling_strategy=PlacementGroupSchedulingStrategy(
                placement_group=pg, placement_group_bundle_index=bundle_idx
            ),
            num_cpus=0,  # schedulable even when the bundle's CPUs are taken by workers
        ).remote(self.port_range_low, self.port_range_high)

    def _master_probe(self) -> Any:
        """The probe on rank 0's bundle: bundle 0 of node 0, or a unified group's first in order."""
        first = self._sorted_bundle_indices[0] if self._unified and self._sorted_bundle_indices else 0
        return self._probe(0, first)

    def get_available_address_and_port(self, pg_idx: int, bundle_idx: int) -> tuple[str, int]:
        """(IP of that bundle's node, a free port there in the cluster's port range)."""
        return self.get_available_addresses_and_ports_batch([(pg_idx, bundle_idx)])[0]

    def get_available_addresses_and_ports_batch(
        self, pg_bundle_pairs: list[tuple[int, int]], batch_size: int = 256
    ) -> list[tuple[str, int]]:
        """``get_available_address_and_port`` for many bundles at once, in the input's order: all
        probes start together; results are fetched ``batch_size`` at a time."""
        import ray

        refs = [self._probe(pg, bundle) for pg, bundle in pg_bundle_pairs]
        out: dict[Any, tuple[str, int]] = {}
        pending = list(refs)
        while pending:
            ready, pending = ray.wait(pending, num_returns=min(batch_size, len(pending)))
            out.update(zip(ready, ray.get(ready)))
        return [out[r] for r in refs]

    def get_master_address_and_port(self) -> tuple[str, int]:
        """IP of bundle 0's node and a free port there (in ``port_range_low..high``), from a
        zero-CPU task in bundle 0; each call a port no earlier call of this cluster returned
        (worker groups sharing a cluster never share a rendezvous).

        Nothing runs before the first call. A zero-CPU task needs a fresh worker process
        (seconds on a busy node), so from then on the cluster keeps one probe running ahead: a
        call takes its result and starts the next one."""
        import ray

        if not self._pgs():
            raise ValueError("get_master_address_and_port: the virtual cluster is empty (no bundles)")
        for _ in range(10):
            ref = self._next_probe if self._next_probe is not None else self._master_probe()
            self._next_probe = self._master_probe()
            address, port = ray.get(ref)
            if port not in self._allocated_master_ports:
                self._allocated_master_ports.add(port)
                return address, port
        raise RuntimeError(
            f"Failed to find a unique master port after 10 retries in [{self.port_range_low}, "
            f"{self.port_range_high}). Already allocated ports: {sorted(self._allocated_master_ports)}"
        )

    # ---- views -------------------------------------------------------------------------------
    def print_cluster_grid(self, worker_group: Any = None) -> None:
        from .cluster_grid import cluster_grid

        print(cluster_grid(self._bundle_ct_per_node_list, worker_group))

    def print_all_worker_groups(self, worker_groups: list[Any] | None = None) -> None:
        from .cluster_grid import all_groups_grid

        print(all_groups_grid(self._bundle_ct_per_node_list, worker_groups or []))

    # ---- teardown ----------------------------------------------------------------------------
    def shutdown(self) -> bool:
        """Remove every placement group; idempotent."""
        if self._memory_monitor is not None:
            self._memory_monitor.stop()
        if not self._shut_down and self._node_placement_groups:
            try:
                import ray
                from ray.util.placement_group import remove_placement_group

                if ray.is_initialized():
                    if self._next_probe is not None:
                        ray.cancel(self._next_probe)
                    for pg in self._node_placement_groups:
                        remove_placement_group(pg)
            except Exception as exc:  # noqa: BLE001 - shutdown must not raise
                logger.warning("RayVirtualCluster.shutdown: %s", exc)
        self._node_placement_groups = []
        self._next_probe = None
        self._shut_down = True
        return True

    def __del__(self) -> None:
        try:
            self.shutdown()
        except Exception:  # noqa: BLE001 - never raise from a finalizer (Ray may be gone)
            pass
