"""A worker group's named data and how its workers come to be.

``WorkerPlan`` (one per worker: actor options, its bundle, its tied group's bundle indices),
``GroupSettings`` (the reliability and dispatch options a group was built with) and
``GroupState`` (what the group's parts share: workers, plans, metadata, tied groups, the call
tracker, the per-node initializer pool). ``plan_workers`` lays the workers out on the cluster's
bundles; ``build_workers`` creates them through the pool and waits until each is up, or removes
them all and raises WorkerBuildError.
"""

from __future__ import annotations

import re
import traceback
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..reliability.health import CallTracker
from ..worker_env.hygiene import worker_env_vars
from .named_sharding import NamedSharding
from .worker_builder import RayWorkerBuilder
from .worker_initializer import alive, bundle_node_id, is_local, kill_initializers


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

    cluster: Any
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
        self.known_dead = set()


def as_builder(worker: Any) -> RayWorkerBuilder:
    """A RayWorkerBuilder, a worker class (plain or @ray.remote), or its fully qualified name."""
    if isinstance(worker, RayWorkerBuilder):
        return worker
    if isinstance(worker, (str, type)) or hasattr(worker, "__ray_actor_class__"):
        return RayWorkerBuilder(worker)
    raise TypeError(
        f"RayWorkerGroup needs a RayWorkerBuilder, a worker class or its fully qualified name, got {worker!r}"
    )


def checked_sharding(sharding: NamedSharding | None, world: int) -> NamedSharding:
    if sharding is None:
        return NamedSharding(list(range(world)), ["data_parallel"])
    if sorted(int(w) for w in sharding.layout.flatten()) != list(range(world)):
        raise ValueError(
            f"sharding_annotations {sharding.shape} hold worker ids "
            f"{sorted(int(w) for w in sharding.layout.flatten())}, but the group has {world} "
            f"workers (ids 0..{world - 1}); the layout must name each exactly once"
        )
    return sharding


def checked_dp_leaders(leaders: list[int] | None, tied: list[tuple[int, list[int]]]) -> list[int]:
    """The data-parallel leaders: by default every tied group's first rank; given ones must be an
    ascending subset of those (NeMo RL's rule and text: a leader that builds no model would get
    every shard-level call)."""
    firsts, rank = [], 0
    for _, bundles in tied:
        firsts.append(rank)
        rank += len(bundles)
    if leaders is None:
        return firsts
    if not isinstance(leaders, (list, tuple)) or not all(
        isinstance(x, int) and not isinstance(x, bool) for x in leaders
    ):
        raise ValueError(f"dp_leader_worker_indices={leaders!r}: must be a list of worker ranks (ints), e.g. {firsts}")
    leaders = list(leaders)
    if set(leaders) - set(firsts) or leaders != sorted(leaders):
        raise ValueError(
            f"dp_leader_worker_indices {leaders} must be an ascending subset of the tied group leaders {firsts}."
        )
    return leaders


def single_worker_groups(node_bundles: list[int], workers_per_node: Any) -> list[tuple[int, list[int]]]:
    if workers_per_node is None:
        per_node = list(node_bundles)
    elif isinstance(workers_per_node, int) and not isinstance(workers_per_node, bool):
        per_node = [workers_per_node] * len(node_bundles)
    elif isinstance(workers_per_node, list):
        if len(workers_per_node) != len(node_bundles):
            raise ValueError(
                f"workers_per_node has {len(workers_per_node)} entries but the cluster has {len(node_bundles)} nodes"
            )
        per_node = list(workers_per_node)
    else:
        raise ValueError(f"workers_per_node must be None, an int or a list of ints, got {workers_per_node!r}")
    for n, (want, have) in enumerate(zip(per_node, node_bundles)):
        if not isinstance(want, int) or want < 0 or want > have:
            raise ValueError(f"workers_per_node asks for {want!r} workers on node {n}, which has {have} bundles")
    return [(n, [b]) for n, count in enumerate(per_node) for b in range(count)]


def validate_tied(tied: list[tuple[int, list[int]]], node_bundles: list[int]) -> None:
    for node, bundles in tied:
        if not 0 <= node < len(node_bundles):
            raise ValueError(f"bundle_indices_list names node {node}, but the cluster has {len(node_bundles)} nodes")
        bad = [b for b in bundles if not 0 <= b < node_bundles[node]]
        if bad or not bundles:
            raise ValueError(f"bundle_indices_list: node {node} has bundles 0..{node_bundles[node] - 1}, got {bundles}")


def bundle_slots(cluster: Any, pgs: list[Any]) -> list[list[tuple[Any, int]]]:
    """Per logical node, its bundles as (placement group, bundle index) in rank order: the
    cluster's own ``bundle_slots`` (a unified placement group maps node/bundle through the
    topology order), else one placement group per node (stand-in clusters)."""
    from .virtual_cluster import RayVirtualCluster, per_node_slots

    if isinstance(cluster, RayVirtualCluster):
        return cluster.bundle_slots()
    return per_node_slots(pgs)


def available_addresses(
    cluster: Any, slots: list[tuple[Any, int]], master: tuple[str, int]
) -> tuple[list[str], list[int]]:
    """(node IP, free port) of each of these bundles from the cluster's
    ``get_available_addresses_and_ports_batch`` (probes on the bundles' nodes, in the cluster's
    port range), redrawn where two workers, or a worker and the group's rendezvous, got the same
    address and port. Empty lists for a cluster without the method."""
    batch = getattr(cluster, "get_available_addresses_and_ports_batch", None)
    if batch is None or not slots:
        return [], []
    pgs = cluster.get_placement_groups()
    index = {id(pg): i for i, pg in enumerate(pgs)}
    pairs = [(index.get(id(pg), 0), bundle) for pg, bundle in slots]
    found = list(batch(pairs))
    for _ in range(5):
        taken = {tuple(master)}
        clashes = []
        for i, (address, port) in enumerate(found):
            if (address, port) in taken:
                clashes.append(i)
            taken.add((address, port))
        if not clashes:
            break
        for i, pair in zip(clashes, batch([pairs[i] for i in clashes])):
            found[i] = pair
    return [str(a) for a, _ in found], [int(p) for _, p in found]


def plan_workers(
    state: GroupState,
    tied: list[tuple[int, list[int]]],
    slots: list[list[tuple[Any, int]]],
    prefix: str,
    named_groups: bool,
) -> None:
    """Fill ``state`` with one plan per worker: rank, env and name, tied group by tied group.
    ``node``/``bundle`` are logical (NODE_RANK, LOCAL_RANK); ``slots`` says where each is."""
    cluster = state.cluster
    world = sum(len(b) for _, b in tied)
    state.master_address, state.master_port = cluster.get_master_address_and_port()
    addresses, ports = available_addresses(
        cluster,
        [slots[node][bundle] for node, bundles in tied for bundle in bundles],
        (state.master_address, state.master_port),
    )
    driver_env = worker_env_vars()  # NeMo RL 2026: read when the group is made, launcher variables left out
    rank = 0
    for g, (node, bundles) in enumerate(tied):
        group = []
        for local, bundle in enumerate(bundles):
            name = f"{prefix}-grp{g}-{local}" if named_groups else f"{prefix}-{node}-{bundle}"
            # the user's environment comes from init_ray's job-level runtime_env (lowest)
            env = {
                **driver_env,  # the driver's environment now, over the class's @ray.remote runtime_env
                **state.settings.env_vars,
                "RANK": str(rank),
                "LOCAL_RANK": str(bundle),
                "WORLD_SIZE": str(world),
                "MASTER_ADDR": state.master_address,
                "MASTER_PORT": str(state.master_port),
                "NODE_RANK": str(node),
                # NeMo RL 2026: every worker's (node IP, free port), in rank order, for servers
                # of their own (python literals, as NeMo RL writes them)
                "AVAILABLE_ADDR_LIST": str(addresses),
                "AVAILABLE_PORT_LIST": str(ports),
                "NRL_WORKER_GROUP": state.name_prefix,  # RANK is per group: which group this is
                **cluster.worker_env(node, bundle),
            }
            if state.settings.enable_gradient_compression:
                env["SLURM_RL_GRADIENT_COMPRESSION"] = "fp16"
            bundle_indices = (node, bundles) if local == 0 else None
            if local == 0:
                state.dp_leader_worker_indices.append(rank)
            options = {"name": name, "num_cpus": 1, "runtime_env": {"env_vars": env}}
            pg, physical = slots[node][bundle]
            state.plans.append(WorkerPlan(options, bundle_indices, pg, physical, node))
            state.metadata.append(
                {
                    "node_idx": node,
                    "local_rank": bundle,
                    "global_rank": rank,
                    "name": name,
                    "bundle_indices": bundle_indices,
                    "tied_group_idx": g,
                    "dp_shard_idx": g,
                }
            )
            state.worker_to_tied_group_index[rank] = g
            group.append(rank)
            rank += 1
        state.tied_workers_groups.append(group)


class WorkerBuildError(RuntimeError):
    """A worker could not be created (import error, constructor exception, configure_worker
    error). Names the worker index, its node and the (remote) traceback; the group has removed
    every worker it had created."""

    def __init__(self, index: int, name: str, node: str, cause: BaseException) -> None:
        self.index, self.node, self.cause = index, node, cause
        detail, root = explain_cause(cause)
        super().__init__(f"worker {index} ({name}) on {node} failed to build: {root}\n{detail}")


_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_ROOT = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt|Warning)\b.*")


def explain_cause(cause: BaseException) -> tuple[str, str]:
    """(the worker's own traceback, its last error line). A Ray error carries the remote
    traceback in its text: that is shown (without Ray's caret lines and colours), not the
    driver's frames inside ray.get; the root error (``ModuleNotFoundError: No module named
    'torchh'``) is what the message leads with."""
    text = str(cause) if "File " in str(cause) else "".join(traceback.format_exception(cause))
    lines = [ln for ln in _ANSI.sub("", text).splitlines() if ln.strip() and set(ln.strip()) != {"^"}]
    roots = [ln for ln in lines if _ROOT.match(ln)]
    root = roots[-1] if roots else f"{type(cause).__name__}: {lines[0] if lines else cause!r}"
    return "\n".join(ln for ln in lines if ln is not roots[-1]) if roots else "\n".join(lines), root


class WorkerBuildValueError(WorkerBuildError, ValueError):
    """A WorkerBuildError whose cause is a ValueError (e.g. a class name that does not import):
    ``except ValueError`` keeps catching it, as before."""


def build_error(index: int, name: str, node: str, cause: BaseException) -> WorkerBuildError:
    cls = WorkerBuildValueError if isinstance(cause, ValueError) else WorkerBuildError
    return cls(index, name, node, cause)


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


def _initializer(state: GroupState, plan: WorkerPlan, py: str, check: bool) -> Any:
    """The pool's initializer for the plan's node, started on first use. With ``check`` (a
    restart), a dead one (its node died, and the workers it owned with it) or one on another
    node than the bundle now (Ray moved the bundle) is replaced; the old handle is kept until
    the group ends (dropping it would let Ray reap it with any worker it still owns)."""
    pool = state.initializer_pool
    current = pool.get(plan.node)
    if check and current is not None and not is_local(current):
        moved = getattr(current, "_slurm_rl_node_id", None) != bundle_node_id(plan.placement_group, plan.bundle)
        if moved or not alive(current):
            state.retired_initializers.append(current)
            current = None
    if current is None:
        current = state.builder.initializer(py, plan.placement_group, plan.bundle)
        if not is_local(current):
            current._slurm_rl_node_id = bundle_node_id(plan.placement_group, plan.bundle)
        pool[plan.node] = current
    return current


def start_workers(state: GroupState, plans: list[WorkerPlan], check: bool = False) -> list[Any]:
    """Ask each plan's initializer for its worker: an actor handle (driver's Python) or an
    ObjectRef of one (an initializer actor; they all start at once). Raises what a local
    initializer raised (the index is the next item's)."""
    builder = state.builder
    num_gpus_per_node = getattr(state.cluster, "num_gpus_per_node", None)
    started: list[Any] = []
    for p in plans:
        py = builder.python_for(p.options)
        initializer = _initializer(state, p, py, check)
        args = (p.placement_group, p.bundle, state.frac, p.bundle_indices)
        options = builder.worker_options(p.options, py)
        if is_local(initializer):
            started.append(initializer.create_worker(*args, num_gpus_per_node=num_gpus_per_node, **options))
        else:
            started.append(initializer.create_worker.remote(*args, num_gpus_per_node=num_gpus_per_node, **options))
    return started


def _resolve(started: Any) -> Any:
    import ray

    return ray.get(started) if isinstance(started, ray.ObjectRef) else started


def create_workers(state: GroupState, plans: list[WorkerPlan]) -> list[Any]:
    """Create the planned workers again (a restart: initializers checked, in parallel) without
    waiting for their ``__init__``."""
    return [_resolve(s) for s in start_workers(state, plans, check=True)]


def build_workers(state: GroupState, plans: list[WorkerPlan]) -> list[Any]:
    """Create every worker and wait until each is up; on any failure kill what was created and
    raise WorkerBuildError for the first worker that failed."""
    import ray

    created: list[Any] = []
    current = 0
    try:
        state.builder.prepare([p.placement_group for p in plans])
        started: list[Any] = []
        for p in plans:  # one by one, so that a failure names its worker
            current = len(started)
            started += start_workers(state, [p])
        for index, s in enumerate(started):
            current = index
            created.append(_resolve(s))
        ready = [w.__ray_ready__.remote() for w in created]
        for index, ref in enumerate(ready):
            current = index
            ray.get(ref)
        return created
    except Exception as exc:
        for w in created:
            try:
                ray.kill(w)
            except Exception:  # noqa: BLE001 - best effort while reporting the real error
                pass
        plan = plans[current]
        raise build_error(current, plan.name, _bundle_node(plan.placement_group, plan.bundle), exc) from exc
