"""What SLURM says of its partitions and QOS, for preflight and the image cache: a mixin of
``SlurmClient`` (client.py), asked through its ``run``; the node table once per client."""

from __future__ import annotations

from ..core.errors import UsageError
from .records import SINFO_NODE_FORMAT, PartitionInfo, QosLimits, parse_sinfo_nodes, parse_tres
from .runner import Completed


class PartitionQueries:
    _partitions: dict[str, PartitionInfo] | None = None

    def run(self, argv: list[str], timeout_s: float | None = None, check: bool = True, hint: str = "") -> Completed:
        raise NotImplementedError  # SlurmClient's

    def partitions(self) -> dict[str, PartitionInfo]:
        """Every partition: node count, its largest node's CPUs, memory (MB) and GPUs, and which
        is the default; one sinfo call per client (a submit asks once)."""
        if self._partitions is None:
            res = self.run(["sinfo", "-h", "-N", "-o", SINFO_NODE_FORMAT], check=False)
            self._partitions = parse_sinfo_nodes(res.stdout)
        return self._partitions

    def answering_partitions(self) -> dict[str, PartitionInfo]:
        """partitions(), where the controller must answer: one that does not is SlurmCommandError."""
        res = self.run(["sinfo", "-h", "-N", "-o", SINFO_NODE_FORMAT], hint="is its slurmctld up?")
        self._partitions = parse_sinfo_nodes(res.stdout)
        return self._partitions

    def partition(self, partition: str | None) -> PartitionInfo | None:
        """One partition (the default one when None); None if SLURM does not know it."""
        table = self.partitions()
        if partition is None:
            return next((p for p in table.values() if p.default), None)
        return table.get(partition)

    def partition_nodes(self, partition: str | None) -> tuple[str, int] | None:
        """(partition, its node count); the default partition when None; None if unknown."""
        found = self.partition(partition)
        return (found.name, found.nodes) if found else None

    def partition_capacity(self, partition: str | None) -> tuple[int, int, int] | None:
        """(CPUs, memory in MB, GPUs) of the largest node of a partition; None if unknown."""
        found = self.partition(partition)
        return (found.cpus, found.mem_mb, found.gpus) if found else None

    def partition_time_limit(self, partition: str | None) -> str | None:
        """A partition's time limit as sinfo prints it (``1-00:00:00``); None if infinite or unknown."""
        found = self.partition(partition)
        return found.max_time if found else None

    def qos_limits(self, qos: str) -> QosLimits | None:
        """A QOS's per-job limits from SLURM's accounting; None where the site keeps none (no
        sacctmgr, no slurmdbd) or does not know the QOS (sbatch then says so itself)."""
        try:
            res = self.run(
                ["sacctmgr", "-n", "-P", "show", "qos", qos, "format=Name,MaxWall,MaxTRES,MaxTRESPerNode"], check=False
            )
        except UsageError:  # no sacctmgr here
            return None
        for line in res.stdout.splitlines() if res.returncode == 0 else []:
            parts = line.strip().split("|")
            if len(parts) == 4 and parts[0] == qos:
                return QosLimits(qos, parts[1] or None, parse_tres(parts[2]), parse_tres(parts[3]))
        return None

    def partition_node_names(self, partition: str) -> list[str]:
        """The names of a partition's nodes, sorted."""
        res = self.run(["sinfo", "-h", "-N", "-p", partition, "-o", "%n"], check=True)
        return sorted({line.strip() for line in res.stdout.splitlines() if line.strip()})
