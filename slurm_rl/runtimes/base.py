"""What every container runtime answers: the one interface the rest of slurm-rl asks (render,
submit, attach, teardown, finalize, doctor, images), so that nothing outside ``runtimes/``
knows a runtime by its name. The defaults are the bare node's ("none"); a runtime overrides
what it does differently. Adding one: a module with a subclass, registered in ``__init__``."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from ..core.checks import Check
from ..core.errors import UsageError

if TYPE_CHECKING:
    from ..config.spec import ClusterSpec
    from ..core.manifest import Container
    from ..core.paths import JobPaths
    from ..slurm import SlurmClient

HERE = Path(__file__).resolve().parent
PROBE_RUNTIME_PREFIX = "SLURM_RL_RUNTIME "  # a probe's line about the node's runtime (JSON after it)


class Runtime:
    """A container runtime: how each node's step of a job is started and what is left after it."""

    name: ClassVar[str]
    title: ClassVar[str]  # as people write it: "Pyxis", "Apptainer"
    contained: ClassVar[bool] = True  # the job's processes run inside an image (False: bare)
    has_image_cache: ClassVar[bool] = False  # a per-node image cache (`slurm-rl images`)
    probed: ClassVar[tuple[str, ...]] = ()  # names of the checks ``probe_checks`` adds
    # a plain shell `doctor --probe` runs on the bare node before the probe (what the runtime
    # needs of the node for a user who is not root: runtimes/unprivileged.py); "": none
    needs_shell: ClassVar[str] = ""
    # its srun flags are SPANK options: one set for a whole srun, every heterogeneous component
    # included (given per component they must be equal; Pyxis refuses a --container-name repeated)
    step_wide_flags: ClassVar[bool] = False

    # ---- render and submit --------------------------------------------------------------------
    def cache_mb(self, spec: ClusterSpec, image: str) -> int:
        """The per-node image cache's budget for ``image`` (0: no cache)."""
        return 0

    def launch(self, container: Container, workdir: str) -> tuple[list[str], list[str]]:
        """(extra srun flags, command prefix) of the job's node step, as argv items, unquoted."""
        return [], []

    def shell_flags(self, container: Container) -> list[str]:
        """More srun flags of the node step, as shell text (set by ``prepare_template``'s lines)."""
        return []

    def prepare_template(self, container: Container) -> str:
        """A template (under templates/) the batch script includes before the node step: the
        runtime's per-job preparation on every node. "": none."""
        return ""

    def stage(self, container: Container, paths: JobPaths) -> None:
        """Files this runtime's steps read from the job dir, written at submit."""

    def requeue_cleanup(self) -> str:
        """A shell command run on every node before a requeue (plain shell, bare node; the job
        id in ``$SLURM_JOB_ID``): what the runtime left of the attempt's step. "": nothing."""
        return ""

    def leftovers_shell(self) -> str:
        """Shell run by the bare-node cleanup (job/cleanup_node.sh) with the job id in ``$job``:
        removes what the runtime left of the job on the node, printing each removed name on a
        line of its own. "": nothing to remove."""
        return ""

    def python_hint(self, container: Container) -> str:
        """What a job whose interpreter is missing on a node says after the path and the node."""
        return (
            f' (in the container image {container.image}); set "python" in the spec to the image\'s own '
            "interpreter with slurm_rl installed (e.g. python3)"
        )

    # ---- a running job ------------------------------------------------------------------------
    def attach(
        self,
        container: Container,
        workdir: str,
        temp_dir: str,
        command: list[str],
        variables: list[str],
        pid: int | None,
    ) -> list[str]:
        """``command`` as it runs on a node of the running job, in its container: ``variables``
        are the names of ours it needs (the job's Ray address and token); ``temp_dir``: the job's
        node-local dir; ``pid``: the node's bootstrap (its node_start event), None where the node
        has not started yet."""
        return command

    # ---- doctor and preflight -----------------------------------------------------------------
    def site_check(self, spec: ClusterSpec, config: dict[str, str]) -> Check | None:
        """What the login node can tell about this runtime at this site (SLURM's config); None:
        nothing (the probe checks it on a node)."""
        return None

    def probe(self, spec: ClusterSpec, python_argv: list[str]) -> tuple[list[str], list[str]]:
        """(srun flags, argv) of the doctor's probe: ``python_argv`` as a job runs it."""
        return [], python_argv

    def probe_checks(self, stdout: str) -> list[Check]:
        """Checks from the probe's own lines about the node's runtime (``probe`` printed them)."""
        return []

    def needs_checks(self, stdout: str) -> list[Check]:
        """Checks from ``needs_shell``'s line (runtimes/unprivileged.py): [] as root."""
        return []

    def preflight(self, spec: ClusterSpec, client: SlurmClient) -> ClusterSpec:
        """The spec as this site allows it for this runtime (said once, on stderr, if changed)."""
        return spec

    def image_cache_argv(self, spec: ClusterSpec, action: str, keys: tuple[str, ...]) -> list[str]:
        """argv of `slurm-rl images ACTION` (list|prune) on each node: one JSON line per node.
        A runtime without a per-node cache refuses: exit 2, one line."""
        raise UsageError(
            f"spec {spec.cluster_name!r} has container_runtime {self.name!r}, which keeps no per-node image "
            "cache; `slurm-rl images` lists and prunes the one of a spec whose runtime keeps one (pyxis)"
        )
