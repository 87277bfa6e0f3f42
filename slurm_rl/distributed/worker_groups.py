"""RayWorkerBuilder, RayWorkerGroup, MultiWorkerFuture: create worker actors in a virtual
cluster's placement groups and run methods on them in parallel (NeMo RL's names and shapes)."""

from __future__ import annotations

import logging
import warnings
from typing import Any

from .virtual_cluster import RayVirtualCluster
from .worker_builder import RayWorkerBuilder, WorkerHandle, _actor_of

logger = logging.getLogger(__name__)
ONLY_ON = ("all", "tied_leader", "all_tied_workers")


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
