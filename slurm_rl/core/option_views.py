"""What the job options imply, read as properties of JobOptions (core/options.py): the Ray
nodes a job has, whether it is interactive, whether its head runs the dashboard, whether it is a
heterogeneous job. A mixin, so the options model keeps one field per option and no more."""

from __future__ import annotations

from typing import TYPE_CHECKING


class DerivedOptions:
    if TYPE_CHECKING:  # JobOptions' fields these read
        nodes: int
        head_node: str
        experiment: str
        dashboard: bool
        head_partition: str | None

    @property
    def total_nodes(self) -> int:
        """Ray nodes of the job: --nodes, plus the dedicated head with --head-node cpu."""
        return self.nodes + (1 if self.head_node == "cpu" else 0)

    @property
    def interactive(self) -> bool:
        """No experiment: the cluster stays up (attach, notebooks, dashboard)."""
        return not self.experiment

    @property
    def wants_dashboard(self) -> bool:
        """Ray's dashboard runs on the head: asked for (--dashboard, spec), or an interactive cluster."""
        return self.dashboard or self.interactive

    @property
    def heterogeneous(self) -> bool:
        """Head and workers are two components of one SLURM hetjob."""
        return bool(self.head_partition)
