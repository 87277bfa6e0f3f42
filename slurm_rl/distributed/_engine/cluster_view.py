"""What the engine needs of a cluster, and nothing more: the protocol that the public
``RayVirtualCluster`` satisfies (and that ``worker_groups`` adapts a stand-in cluster to). The
engine never imports the public class: a worker group hands its cluster in as this."""

from __future__ import annotations

from typing import Any, Protocol

Slot = tuple[Any, int]  # (placement group, bundle index in it)


def per_node_slots(pgs: list[Any]) -> list[list[Slot]]:
    """One placement group per logical node: node n's bundles are group n's, in order."""
    return [[(pg, b) for b in range(len(pg.bundle_specs))] for pg in pgs]


def slot_indices(slots: list[Slot], pgs: list[Any]) -> list[tuple[int, int]]:
    """NeMo RL's (placement group index, bundle index) pairs of these slots among ``pgs``."""
    index = {id(pg): i for i, pg in enumerate(pgs)}
    return [(index.get(id(pg), 0), b) for pg, b in slots]


class ClusterView(Protocol):
    @property
    def use_gpus(self) -> bool: ...

    @property
    def max_colocated_worker_groups(self) -> int: ...

    @property
    def num_gpus_per_node(self) -> int | None: ...

    def bundle_slots(self) -> list[list[Slot]]:
        """Per logical node, its bundles as (placement group, bundle index), in rank order."""
        ...

    def worker_env(self, node: int, bundle: int) -> dict[str, str]:
        """What a worker in this bundle gets from the cluster's options (GPU pinning, backend)."""
        ...

    def get_master_address_and_port(self) -> tuple[str, int]:
        """A group's rendezvous: rank 0's node IP and a port no earlier group of it got."""
        ...

    def addresses_and_ports(self, slots: list[Slot]) -> list[tuple[str, int]]:
        """(node IP, free port) of each bundle, in order; [] where the cluster cannot probe."""
        ...


class StandIn:
    """A cluster that is not slurm-rl's (a test's stand-in, another library's) seen as a
    ClusterView: one placement group per logical node, and no address probes unless it has
    NeMo RL's batched lookup."""

    def __init__(self, cluster: Any) -> None:
        self.cluster = cluster
        self.use_gpus = cluster.use_gpus
        self.max_colocated_worker_groups = cluster.max_colocated_worker_groups
        self.num_gpus_per_node = getattr(cluster, "num_gpus_per_node", None)

    def bundle_slots(self) -> list[list[Slot]]:
        return per_node_slots(self.cluster.get_placement_groups())

    def worker_env(self, node: int, bundle: int) -> dict[str, str]:
        return dict(self.cluster.worker_env(node, bundle))

    def get_master_address_and_port(self) -> tuple[str, int]:
        return self.cluster.get_master_address_and_port()

    def addresses_and_ports(self, slots: list[Slot]) -> list[tuple[str, int]]:
        batch = getattr(self.cluster, "get_available_addresses_and_ports_batch", None)
        if batch is None:
            return []
        return list(batch(slot_indices(slots, self.cluster.get_placement_groups())))
