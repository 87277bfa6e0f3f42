"""NeMo RL's address and port lookups of a virtual cluster (``get_master_address_and_port``,
``get_available_address(es)_and_port(s)``), as a base class of the public ``RayVirtualCluster``:
they run over the facade's ``_probe_in`` and ``_ray`` (which read the probe function, the
scheduling strategy and ``ray`` from NeMo RL's module path, where tests patch them) and its
``MasterPorts``."""

from __future__ import annotations

from typing import Any

from .cluster_view import slot_indices
from .master_ports import MasterPorts, gather_in_order


def _group(pgs: list[Any], pg_idx: int) -> Any:
    pg = pgs[0] if len(pgs) == 1 else pgs[pg_idx] if 0 <= pg_idx < len(pgs) else None
    if pg is None or not pg.bundle_specs:
        raise RuntimeError("No valid placement groups found to get available address and port")
    return pg


class ClusterAddresses:
    _master_ports: MasterPorts
    _unified: bool
    _sorted_bundle_indices: list[int] | None

    def _ray(self) -> Any:  # the facade module's ``ray`` (tests replace it there)
        raise NotImplementedError

    def _probe_in(self, pg: Any, bundle_idx: int) -> Any:
        raise NotImplementedError

    def _pgs(self) -> list[Any]:
        raise NotImplementedError

    def get_placement_groups(self) -> list[Any]:
        raise NotImplementedError

    @property
    def _allocated_master_ports(self) -> set[int]:
        return self._master_ports.allocated

    def _master_probe(self) -> Any:
        """The probe on rank 0's bundle: bundle 0 of node 0, or a unified group's first in order."""
        first = self._sorted_bundle_indices[0] if self._unified and self._sorted_bundle_indices else 0
        return self._probe_in(_group(self._pgs(), 0), first)

    def get_available_address_and_port(self, pg_idx: int, bundle_idx: int) -> tuple[str, int]:
        """(IP of that bundle's node, a free port there in the cluster's port range)."""
        return self.get_available_addresses_and_ports_batch([(pg_idx, bundle_idx)])[0]

    def get_available_addresses_and_ports_batch(
        self, pg_bundle_pairs: list[tuple[int, int]], batch_size: int = 256
    ) -> list[tuple[str, int]]:
        """``get_available_address_and_port`` for many bundles at once, in the input's order: all
        probes start together; up to ``batch_size`` answers in one ``ray.get``, more fetched
        ``batch_size`` at a time as they finish. A single placement group (unified) serves every
        index; one without bundles is a RuntimeError."""
        pgs = self.get_placement_groups()
        refs = [self._probe_in(_group(pgs, pg), bundle) for pg, bundle in pg_bundle_pairs]
        if len(refs) <= batch_size:
            return list(self._ray().get(refs))
        return gather_in_order(self._ray(), refs, batch_size)

    def addresses_and_ports(self, slots: list[tuple[Any, int]]) -> list[tuple[str, int]]:
        """The engine's form (ClusterView): (placement group, bundle) slots instead of indices."""
        return list(self.get_available_addresses_and_ports_batch(slot_indices(slots, self.get_placement_groups())))

    def get_master_address_and_port(self) -> tuple[str, int]:
        """IP of bundle 0's node and a free port there (in ``port_range_low..high``); each call
        a port no earlier call of this cluster returned. Nothing runs before the first call;
        from then on one probe runs ahead (see _engine/master_ports.py)."""
        if not self._pgs():
            raise ValueError("get_master_address_and_port: the virtual cluster is empty (no bundles)")
        return self._master_ports.next(self._master_probe)
