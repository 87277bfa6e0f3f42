"""Job options: CLI flags resolved against the spec once, into one frozen object.

Precedence: CLI flag > spec default > built-in default. ``render`` and ``submit`` only read this.
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..core.errors import UsageError
from ..core.ports import check_port_base
from ..core.spec import SBATCH_NAME, ClusterSpec

_TIME = re.compile(r"^(\d+-)?\d+(:\d{1,2}){0,2}$|^\d+-\d+$")
_SIGNAL = re.compile(r"^(B:|R:|RB:)?((?:SIG)?[A-Z0-9]+)@(\d+)$")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


@dataclass(frozen=True)
class JobOptions:
    """Everything a job needs besides the spec. Paths are absolute."""

    experiment: str
    experiment_args: tuple[str, ...] = ()
    nodes: int = 1
    name: str = "slurm-rl"
    user: str = "user"
    workdir: str = "/"
    python: str = "python3"
    gpus_per_node: int = 0
    cpus_per_node: int | None = None
    time: str | None = None
    partition: str | None = None
    account: str | None = None
    container_image: str | None = None
    port_base: int | None = None
    ready_timeout_s: float = 180.0
    oversubscribe: bool = False
    signal: str = "B:USR2@120"
    requeue: int = 0
    min_nodes: int | None = None       # the driver goes on once this many nodes are up (None: all)
    head_node: str = "shared"          # "cpu": one more node runs only the Ray head (no CPUs/GPUs for Ray)
    head_partition: str | None = None  # the head's partition: a heterogeneous job (head + workers)
    extra_env: tuple[tuple[str, str], ...] = field(default_factory=tuple)

    @property
    def total_nodes(self) -> int:
        """Ray nodes of the job: --nodes, plus the dedicated head with --head-node cpu."""
        return self.nodes + (1 if self.head_node == "cpu" else 0)

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def resolve_options(spec: ClusterSpec, experiment: str | None, *, experiment_args: tuple[str, ...] = (),
                    nodes: int = 1, name: str | None = None, user: str, workdir: str | None = None,
                    gpus_per_node: int | None = None, cpus_per_node: int | None = None,
                    time: str | None = None, partition: str | None = None,
                    account: str | None = None, container_image: str | None = None,
                    port_base: int | None = None, ready_timeout_s: float = 180.0,
                    oversubscribe: bool = False, python: str | None = None,
                    signal: str = "B:USR2@120", requeue: int = 0, head_node: str = "shared", min_nodes: int | None = None,
                    head_partition: str | None = None) -> JobOptions:
    """Validate flags (exit-2 errors name the flag) and merge them with the spec."""
    exp = Path(experiment) if experiment else None  # None: an interactive cluster (no driver)
    if exp is not None and not exp.is_file():
        raise UsageError(f"experiment {experiment!r} does not exist or is not a file; pass the path of your driver script")
    if nodes < 1:
        raise UsageError(f"--nodes {nodes}: must be >= 1")
    if gpus_per_node is not None and gpus_per_node < 0:
        raise UsageError(f"--gpus-per-node {gpus_per_node}: must be >= 0")
    if cpus_per_node is not None and cpus_per_node < 1:
        raise UsageError(f"--cpus-per-node {cpus_per_node}: must be >= 1")
    if time is not None and not _TIME.match(time):
        raise UsageError(f"--time {time!r}: not a SLURM time; use MM, HH:MM:SS or D-HH:MM:SS, e.g. 1:00:00")
    m = _SIGNAL.match(signal)
    if not m:
        raise UsageError(f"--signal {signal!r}: use [B:]SIG@SECONDS, e.g. B:USR2@120")
    if m.group(2) in ("USR1", "SIGUSR1", "10"):
        raise UsageError(f"--signal {signal!r}: USR1 is taken by NCCL's own handler; use USR2, e.g. B:USR2@120")
    if requeue < 0:
        raise UsageError(f"--requeue {requeue}: must be >= 0 (the number of automatic requeues)")
    if port_base is not None:
        check_port_base(port_base)
    if ready_timeout_s <= 0:
        raise UsageError(f"--ready-timeout {ready_timeout_s}: must be > 0 seconds")
    job_name = name or (exp.stem if exp else "interactive")
    if not _NAME.match(job_name):
        raise UsageError(f"--name {job_name!r}: use up to 64 letters, digits, '.', '_' or '-'")
    head_partition = head_partition or spec.head_partition
    if head_partition:
        head_node = "cpu"  # a head of its own partition is a CPU-only head
    if head_node not in ("shared", "cpu"):
        raise UsageError(f"--head-node {head_node!r}: use 'shared' (node 0 also runs workers) or 'cpu' "
                         f"(one more node runs only the Ray head and the driver)")
    total = nodes + (1 if head_node == "cpu" else 0)
    if min_nodes is not None and not 1 <= min_nodes <= total:
        raise UsageError(f"--min-nodes {min_nodes}: must be 1..{total} (the job's Ray nodes)")
    for flag, value in (("--partition", partition), ("--account", account), ("--head-partition", head_partition)):
        if value is not None and not SBATCH_NAME.match(value):
            raise UsageError(f"{flag} {value!r}: SLURM allows letters, digits, '_', '.', '-' (',' between partitions)")
    image = container_image
    if image is not None and spec.container_runtime == "none":
        raise UsageError("--container-image: the spec's container_runtime is \"none\"; set it to pyxis or apptainer")
    return JobOptions(
        experiment=str(exp.resolve()) if exp else "", experiment_args=tuple(experiment_args), nodes=nodes,
        name=job_name, user=user, workdir=str(Path(workdir or os.getcwd()).resolve()),
        python=python or spec.python or sys.executable,
        gpus_per_node=spec.gpus_per_node if gpus_per_node is None else gpus_per_node,
        cpus_per_node=cpus_per_node if cpus_per_node is not None else spec.cpus_per_node,
        time=time, partition=partition or spec.partition, account=account or spec.account,
        container_image=image, port_base=port_base, ready_timeout_s=float(ready_timeout_s),
        oversubscribe=oversubscribe, signal=signal, requeue=requeue, head_node=head_node, min_nodes=min_nodes,
        head_partition=head_partition,
    )
