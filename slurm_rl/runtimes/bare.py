"""No container ("none"): every process of the job runs on the bare nodes, with the spec's
interpreter; attach runs on the node as it is, and the job's own python cleans up after it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..core.checks import Check
from .base import Runtime

if TYPE_CHECKING:
    from ..config.spec import ClusterSpec
    from ..core.manifest import Container


class Bare(Runtime):
    name = "none"
    title = "no container"
    contained = False

    def python_hint(self, container: Container) -> str:
        return (
            '; set "python" in the spec to an interpreter that every node has, with slurm_rl installed '
            "(e.g. a venv on the shared filesystem)"
        )

    def site_check(self, spec: ClusterSpec, config: dict[str, str]) -> Check | None:
        return Check("container runtime", "ok", 'none: every process runs on the bare nodes ("python" of the spec)')
