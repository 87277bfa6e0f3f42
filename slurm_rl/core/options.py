"""Job options: one pydantic model, the single source of every option's default and check.

The click flags of `render`/`submit` are generated from the fields that carry ``flags``
(``login/flags.py``); a field marked ``spec=True`` takes the cluster spec's field of the same
name as its default (precedence: flag > spec > the default written here, once). The job
manifest (``core/manifest.py``) is this model plus what submit adds, so the node side reads the
same names and values the login node resolved. A new option is one field here.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from .fields import FieldProblem, SlurmName, SlurmTime, time_minutes
from .ports import BLOCK_SIZE

DEFAULT_SIGNAL = "B:USR2@120"
_SIGNAL = re.compile(r"^(B:|R:|RB:)?((?:SIG)?[A-Z0-9]+)@(\d+)$")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


def option(default: Any, *flags: str, help: str, metavar: str | None = None, spec: bool = False) -> Any:
    """A field that is also a command-line flag (``flags``: click's spellings, long one last)."""
    return Field(default, json_schema_extra={"flags": list(flags), "help": help, "metavar": metavar, "spec": spec})


def spec_default(default: Any) -> Any:
    """A field without a flag whose default comes from the spec's field of the same name."""
    return Field(default, json_schema_extra={"spec": True})


class JobOptions(BaseModel):
    """Everything a job needs besides the spec, resolved once on the login node. Paths are absolute."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    experiment: str = ""  # the driver script; "" is an interactive cluster (no driver)
    experiment_args: tuple[str, ...] = ()
    user: str = "user"
    workdir: str = option(
        "",
        "-D",
        "--workdir",
        metavar="DIR",
        help="The driver's working directory on the nodes (a shared path; default: where you submit from).",
    )
    python: str = spec_default("python3")  # the interpreter on the nodes (login: spec.python or the submitter's)
    nodes: int = option(1, "-N", "--nodes", help="Nodes: one Ray node on each.")
    gpus_per_node: int = option(0, "--gpus-per-node", spec=True, help="GPUs per node.")
    cpus_per_node: int | None = option(
        None, "--cpus-per-node", spec=True, help="CPUs per node for Ray (unset: what SLURM gives)."
    )
    time: SlurmTime | None = option(
        None, "-t", "--time", metavar="TIME", help="Time limit, e.g. 30, 1:00:00, 2-00:00:00."
    )
    partition: SlurmName | None = option(None, "-p", "--partition", spec=True, help="Partition.")
    account: SlurmName | None = option(None, "-A", "--account", spec=True, help="Account.")
    name: str = option(
        "", "-J", "--name", help="Job name, also the job dir's parent (default: the experiment's file name)."
    )
    container_image: str | None = option(
        None, "--container-image", metavar="IMAGE", help="Override the spec's cpu_image/gpu_image."
    )
    port_base: int | None = option(
        None,
        "--port-base",
        metavar="PORT",
        help="Pin the Ray daemons' ports to PORT..PORT+9 (unset: free ports picked on each node at start).",
    )
    ready_timeout_s: float = option(
        180.0, "--ready-timeout", metavar="SECONDS", help="Seconds for all nodes to join before the job fails."
    )
    oversubscribe: bool = option(
        False, "--oversubscribe", help="Let other jobs share this job's nodes (sbatch --oversubscribe)."
    )
    signal: str = option(
        DEFAULT_SIGNAL,
        "--signal",
        help="Warning signal before the time limit; the driver gets it via "
        "slurm_rl.on_preempt(callback). Never USR1 (NCCL's).",
    )
    requeue: int = option(
        0, "--requeue", metavar="N", help="Requeue a failed job (driver exit != 0, lost node) up to N times."
    )
    min_nodes: int | None = option(
        None, "--min-nodes", metavar="K", help="Go on once K nodes are up (unset: all); the rest join later."
    )
    head_node: Literal["shared", "cpu"] = option(
        "shared",
        "--head-node",
        help="cpu: one more node runs only the Ray head and the driver (no CPUs/GPUs for Ray work).",
    )
    head_partition: SlurmName | None = option(
        None,
        "--head-partition",
        metavar="PARTITION",
        spec=True,
        help="The CPU head's partition: one heterogeneous job, head + --nodes workers.",
    )

    # ---- checks: each names what is wrong; login/options.py puts the flag in front -------------
    @field_validator("nodes")
    @classmethod
    def _nodes(cls, v: int) -> int:
        if v < 1:
            raise ValueError("must be >= 1")
        return v

    @field_validator("gpus_per_node")
    @classmethod
    def _gpus(cls, v: int) -> int:
        if v < 0:
            raise ValueError("must be >= 0")
        return v

    @field_validator("cpus_per_node")
    @classmethod
    def _cpus(cls, v: int | None) -> int | None:
        if v is not None and v < 1:
            raise ValueError("must be >= 1")
        return v

    @field_validator("signal")
    @classmethod
    def _signal(cls, v: str) -> str:
        m = _SIGNAL.match(v)
        if not m:
            raise ValueError("use [B:]SIG@SECONDS, e.g. B:USR2@120")
        if m.group(2) in ("USR1", "SIGUSR1", "10"):
            raise ValueError("USR1 is taken by NCCL's own handler; use USR2, e.g. B:USR2@120")
        return v

    @field_validator("requeue")
    @classmethod
    def _requeue(cls, v: int) -> int:
        if v < 0:
            raise ValueError("must be >= 0 (the number of automatic requeues)")
        return v

    @field_validator("port_base")
    @classmethod
    def _port_base(cls, v: int | None) -> int | None:
        if v is not None and not 1024 <= v <= 65535 - BLOCK_SIZE:
            raise ValueError(
                f"must be 1024..{65535 - BLOCK_SIZE}; it pins {BLOCK_SIZE} ports from there "
                f"(or leave it out: slurm-rl picks free ports on each node)"
            )
        return v

    @field_validator("ready_timeout_s")
    @classmethod
    def _ready_timeout(cls, v: float) -> float:
        if v <= 0:
            raise ValueError("must be > 0 seconds")
        return float(v)

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if v and not _NAME.match(v):
            raise ValueError("use up to 64 letters, digits, '.', '_' or '-'")
        return v

    @model_validator(mode="before")
    @classmethod
    def _derived_defaults(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        if data.get("head_partition"):
            data = {**data, "head_node": "cpu"}  # a head of its own partition is a CPU-only head
        if data.get("signal") is None and isinstance(data.get("time"), str):
            try:  # the default warning comes 120 s before the limit, or halfway through a shorter one
                data = {**data, "signal": f"B:USR2@{max(1, warning_for(data['time']))}"}
            except ValueError:
                pass  # not a SLURM time: the time field's own check says so
        return data

    @model_validator(mode="after")
    def _warning_before_the_limit(self) -> JobOptions:
        if self.time is not None and signal_seconds(self.signal) >= time_minutes(self.time) * 60:
            raise FieldProblem(
                "signal",
                repr(self.signal),
                f"warns {signal_seconds(self.signal)} s before a time limit of {self.time} "
                f"({time_minutes(self.time) * 60:g} s); warn sooner, e.g. --signal B:USR2@{warning_for(self.time)}",
            )
        return self

    @model_validator(mode="after")
    def _min_nodes(self) -> JobOptions:
        if self.min_nodes is not None and not 1 <= self.min_nodes <= self.total_nodes:
            raise FieldProblem("min_nodes", self.min_nodes, f"must be 1..{self.total_nodes} (the job's Ray nodes)")
        return self

    def replace(self, **changes: Any) -> JobOptions:
        """A copy with ``changes``, checked like the original (``model_copy`` would not check)."""
        return type(self).model_validate({**self.model_dump(), **changes})

    # ---- derived --------------------------------------------------------------------------------
    @property
    def total_nodes(self) -> int:
        """Ray nodes of the job: --nodes, plus the dedicated head with --head-node cpu."""
        return self.nodes + (1 if self.head_node == "cpu" else 0)

    @property
    def interactive(self) -> bool:
        """No experiment: the cluster stays up (attach, notebooks, dashboard)."""
        return not self.experiment

    @property
    def heterogeneous(self) -> bool:
        """Head and workers are two components of one SLURM hetjob."""
        return bool(self.head_partition)


def signal_seconds(signal: str) -> int:
    """Seconds before the limit at which ``--signal`` warns (``B:USR2@120`` -> 120)."""
    return int(signal.rpartition("@")[2])


def warning_for(time_limit: str) -> int:
    """The default warning for a time limit: 120 s, or half the limit when that is shorter."""
    return int(min(signal_seconds(DEFAULT_SIGNAL), time_minutes(time_limit) * 30))


def flag_fields() -> dict[str, dict[str, Any]]:
    """Field name -> its flag metadata, for every option that is a command-line flag."""
    out = {}
    for name, info in JobOptions.model_fields.items():
        extra = info.json_schema_extra
        if isinstance(extra, dict) and extra.get("flags"):
            out[name] = {**extra, "default": info.default}
    return out


def spec_fields() -> list[str]:
    """Options whose default is the spec's field of the same name."""
    return [
        name
        for name, info in JobOptions.model_fields.items()
        if isinstance(info.json_schema_extra, dict) and info.json_schema_extra.get("spec")
    ]


def flag_of(field: str) -> str:
    """How the user spells a field: its long flag, else the field name."""
    meta = flag_fields().get(field)
    return str(meta["flags"][-1]) if meta else field
