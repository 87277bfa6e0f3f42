"""Where a group's workers go: the tied groups (``bundle_indices_list`` or
``workers_per_node``) checked against the cluster's bundles, the sharding and data-parallel
leaders checked against the world, and ``plan_workers``, which gives each worker its rank,
environment, name and bundle in the group's state."""

from __future__ import annotations

from typing import Any

from ..worker_env.collective import COMPRESSION_ENV
from ..worker_env.hygiene import worker_env_vars
from .builder import RayWorkerBuilder
from .cluster_view import ClusterView
from .group_state import GroupState, WorkerPlan
from .named_sharding import NamedSharding


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


def available_addresses(
    cluster: ClusterView, slots: list[tuple[Any, int]], master: tuple[str, int]
) -> tuple[list[str], list[int]]:
    """(node IP, free port) of each of these bundles from the cluster's probes (on the bundles'
    nodes, in the cluster's port range), redrawn where two workers, or a worker and the group's
    rendezvous, got the same address and port. Empty lists for a cluster that cannot probe."""
    if not slots:
        return [], []
    found = list(cluster.addresses_and_ports(slots))
    if not found:
        return [], []
    for _ in range(5):
        taken = {tuple(master)}
        clashes = []
        for i, (address, port) in enumerate(found):
            if (address, port) in taken:
                clashes.append(i)
            taken.add((address, port))
        if not clashes:
            break
        for i, pair in zip(clashes, cluster.addresses_and_ports([slots[i] for i in clashes])):
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
                env[COMPRESSION_ENV] = "fp16"
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
