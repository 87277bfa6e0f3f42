"""Job options: one pydantic model, the single source of every option's default and check.

The fields that carry ``flags`` are the command line's (``login/submission/flags.py`` lists them,
``login/commands/common.py`` makes them click options); a field marked ``spec=True`` takes the
cluster spec's field of the same name as its default (precedence: flag > spec > the default
written here, once). The job manifest (``core/manifest.py``) is this model plus what submit
adds, so the node side reads the same names and values the login node resolved: that is why
the model lives in core/. A new option is one field here.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from .fields import (
    Constraint,
    Dependency,
    Gres,
    HostList,
    MailTypes,
    MailUser,
    OneLine,
    SlurmMemory,
    SlurmName,
    SlurmTime,
)
from .option_checks import check_combinations
from .option_rules import (
    DEFAULT_SIGNAL,
    AtLeast0,
    AtLeast1,
    JobName,
    PortBase,
    Requeues,
    RetryOnCauses,
    SbatchArgs,
    Seconds,
    SrunArgs,
    StallTimeout,
    WarningSignal,
    option,
    spec_default,
    warning_for,
)
from .option_views import DerivedOptions
from .parts import Part


class JobOptions(DerivedOptions, BaseModel):
    """Everything a job needs besides the spec, resolved once on the login node. Paths are absolute."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    experiment: str = ""  # the driver script; "" is an interactive cluster (no driver)
    experiment_args: tuple[str, ...] = ()
    array: str = ""  # a sweep: SLURM's --array (e.g. "0-3%2"); each task is a job of its own (login/sweep.py)
    run_dir: str = ""  # a chain (--chain): the directory its jobs share, checkpoints in it; "": the job dir
    user: str = "user"
    workdir: str = option(
        "",
        "-D",
        "--workdir",
        metavar="DIR",
        help=(
            "The driver's working directory on the nodes (a shared path; default: where you submit "
            "from; in a container: the job dir)."
        ),
    )
    python: str = spec_default("python3", None)  # the interpreter on the nodes (login: spec.python or the submitter's)
    nodes: AtLeast1 = option(1, "-N", "--nodes", help="Nodes: one Ray node on each.")
    gpus_per_node: AtLeast0 = option(0, "--gpus-per-node", spec=True, help="GPUs per node.")
    gpu_type: SlurmName | None = option(None, "--gpu-type", spec=True, help="GPU type, where a partition has several.")
    gpu_request: Literal["gpus-per-node", "gres"] = option(
        "gpus-per-node", "--gpu-request", spec=True, help="How SLURM is asked for GPUs: --gpus-per-node, or --gres=gpu."
    )
    cpus_per_node: AtLeast1 | None = option(
        None, "--cpus-per-node", spec=True, help="CPUs per node for Ray (unset: what SLURM gives)."
    )
    time: SlurmTime | None = option(
        None, "-t", "--time", metavar="TIME", help="Time limit, e.g. 30, 1:00:00, 2-00:00:00 (0: none of its own)."
    )
    partition: SlurmName | None = option(None, "-p", "--partition", spec=True, help="Partition.")
    account: SlurmName | None = option(None, "-A", "--account", spec=True, directive="job", help="Account.")
    name: JobName = option(
        "", "-J", "--name", help="Job name, also the job dir's parent (default: the experiment's file name)."
    )
    container_image: str | None = option(
        None, "--container-image", metavar="IMAGE", help="Override the spec's cpu_image/gpu_image."
    )
    port_base: PortBase | None = option(
        None,
        "--port-base",
        metavar="PORT",
        help="Pin the Ray daemons' ports to PORT..PORT+9 (unset: free ports picked on each node at start).",
    )
    ready_timeout_s: Seconds = option(
        180.0, "--ready-timeout", metavar="SECONDS", help="Seconds for all nodes to join before the job fails."
    )
    oversubscribe: bool = option(
        False,
        "--oversubscribe",
        help="Share CPUs with other --oversubscribe jobs (sbatch --oversubscribe); it then starts only on"
        " nodes whose jobs all allow sharing.",
    )
    signal: WarningSignal = option(
        DEFAULT_SIGNAL,
        "--signal",
        directive="job",
        help="Warning signal before the time limit; the driver gets it via "
        "slurm_rl.on_preempt(callback). Never USR1 (NCCL's).",
    )
    requeue: Requeues = option(
        0, "--requeue", metavar="N", help="Requeue a failed job (driver exit != 0, lost node) up to N times."
    )
    preflight: bool = option(
        False,
        "--preflight",
        spec=True,
        help="Check every node before the driver starts (disk, fabric, GPUs, the job's Python with torch, a timed "
        "gloo exchange); a bad node is named with what was measured (docs/causes.md).",
    )
    on_bad_node: Literal["exclude", "fail"] = option(
        "exclude",
        "--on-bad-node",
        spec=True,
        help="A node preflight finds bad: exclude (the job goes again at once without it; under "
        "--heal a worker node is replaced by a member job instead) or fail.",
    )
    retry_on: RetryOnCauses | None = option(
        None,
        "--retry-on",
        spec=True,
        metavar="CAUSES",
        help="Retry a failure (within --requeue's budget) only for these causes, never on the node it names: "
        "a comma list of node, preempted, stalled, collective, oom, ray, service, driver or exit:CODE "
        "(docs/causes.md). Unset: any failure.",
    )
    heal: AtLeast0 = option(
        0,
        "--heal",
        metavar="K",
        spec=True,
        help="Replace up to K lost worker nodes (member jobs); 0: a lost node ends the job.",
    )
    heal_timeout_s: Seconds = option(
        600.0, "--heal-timeout", metavar="SECONDS", help="With --heal: fail once a replacement has not joined in this."
    )
    stall_timeout: StallTimeout | None = option(
        None,
        "--stall-timeout",
        spec=True,
        metavar="DURATION",
        help="No progress (a metrics step, heartbeat() or the driver's own output) for this long after "
        "the first is a stall: its stacks are taken, then --stall-action. E.g. 30m, 90s, 1h (>= 20 s).",
    )
    stall_action: Literal["warn", "fail", "requeue"] | None = option(
        None,
        "--stall-action",
        spec=True,
        help="On a stall: warn (the job runs on; the default), fail (it ends FAILED, its GPUs go back) "
        "or requeue (within --requeue's budget).",
    )
    min_nodes: int | None = option(
        None, "--min-nodes", metavar="K", help="Go on once K nodes are up (unset: all); the rest join later."
    )
    head_node: Literal["shared", "cpu"] = option(
        "shared",
        "--head-node",
        help="cpu: one more node runs only the Ray head and the driver (no CPUs/GPUs for Ray work).",
    )
    driver_start: Literal["auto", "early", "ready"] = option(
        "auto",
        "--driver-start",
        help="early: the driver starts with the head and init_ray() waits for the nodes; ready: it starts "
        "once the nodes are up (a plain Ray program, NeMo Gym's initialize_ray); auto: early when the "
        "experiment calls init_ray, else ready.",
    )
    chain: AtLeast0 = option(
        0,
        "--chain",
        metavar="K",
        help="Submit up to K jobs, each starting when the one before ends (afterany), sharing one run "
        "directory (slurm_rl.run_dir()): a run longer than the time limit resumes from its checkpoint in "
        "the next; the rest are cancelled once the driver exits 0.",
    )
    snapshot: bool = option(
        False,
        "--snapshot",
        spec=True,
        help="Run from a copy of the experiment's git repository (tracked files, as on disk) made at "
        "submit: edits after submit do not reach the queued job.",
    )
    dashboard: bool = option(
        False,
        "--dashboard",
        spec=True,
        help="Start Ray's dashboard on the head (state API: `ray list tasks`, `attach --dashboard`); "
        "interactive clusters always have it.",
    )
    ray_client: bool = option(
        False,
        "--ray-client",
        spec=True,
        help="Serve Ray Client on the head (a free port, token-protected, in cluster.json): drivers off the "
        "job's nodes connect with ray://HOST:PORT (`slurm-rl attach JOB --client`).",
    )
    head_partition: SlurmName | None = option(
        None,
        "--head-partition",
        metavar="PARTITION",
        spec=True,
        help="The CPU head's partition: one heterogeneous job, head + --nodes workers.",
    )
    parts_file: str | None = option(
        None,
        "--parts",
        metavar="FILE",
        help="A job of parts (YAML or JSON, docs/parts.md): Ray parts (trainer, generation) and services "
        "(judges, sandboxes), each with its own nodes, partition and GPUs, in one heterogeneous job.",
    )
    parts: dict[str, Part] = Field(default_factory=dict)  # --parts' file, read once at submit
    start_gate_s: int = 0  # --cluster first: the batch script waits this long for the go (login/submission/first.py)

    # ---- what sites require, spelled as sbatch spells it (the spec may set site defaults); sbatch:
    # an #SBATCH line of the job's own (the first component) or of its nodes' (the workers'), directives.py
    qos: SlurmName | None = option(None, "-q", "--qos", directive="job", spec=True, help="Quality of service.")
    constraint: Constraint | None = option(
        None, "-C", "--constraint", directive="nodes", spec=True, metavar="FEATURES", help="Node features, e.g. a100&ib"
    )
    exclusive: bool = option(False, "--exclusive", spec=True, help="Whole nodes, shared with no other job.")
    segment: AtLeast1 | None = option(
        None,
        "--segment",
        directive="nodes",
        spec=True,
        metavar="N",
        help="Nodes in groups of N, each in one topology block (23.11+).",
    )
    mem: SlurmMemory | None = option(
        None, "--mem", directive="nodes", spec=True, metavar="SIZE", help="Memory per node, e.g. 64G."
    )
    mem_per_cpu: SlurmMemory | None = option(
        None, "--mem-per-cpu", directive="nodes", spec=True, metavar="SIZE", help="Memory per CPU (not with --mem)."
    )
    gres: Gres | None = option(None, "--gres", spec=True, metavar="LIST", help="Generic resources, e.g. gpu:8.")
    reservation: SlurmName | None = option(
        None, "--reservation", directive="job", spec=True, help="Run in this reservation."
    )
    exclude: HostList | None = option(
        None, "-x", "--exclude", directive="nodes", metavar="NODES", help="Never these nodes."
    )
    nodelist: HostList | None = option(
        None, "-w", "--nodelist", directive="nodes", metavar="NODES", help="Exactly these nodes."
    )
    dependency: Dependency | None = option(
        None, "-d", "--dependency", directive="job", help="Start after, e.g. afterok:1234."
    )
    mail_type: MailTypes | None = option(
        None, "--mail-type", directive="job", spec=True, metavar="TYPES", help="Mail on, e.g. END,FAIL."
    )
    mail_user: MailUser | None = option(
        None, "--mail-user", directive="job", spec=True, metavar="ADDRESS", help="Mail to."
    )
    comment: OneLine | None = option(None, "--comment", directive="job", help="A comment SLURM keeps with the job.")
    sbatch_args: SbatchArgs = option(
        (),
        "--sbatch-arg",
        spec=True,
        metavar="ARG",
        help="Any other sbatch option, e.g. --sbatch-arg=--licenses=fs:1 (repeatable; added to the spec's).",
    )
    srun_args: SrunArgs = option(
        (), "--srun-arg", spec=True, metavar="ARG", help="Any other option of the node step's srun (repeatable)."
    )

    # ---- checks: each names what is wrong; login/submission/resolve.py puts the flag in front -------------
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
    def _combinations(self) -> JobOptions:
        check_combinations(self)  # the warning before the limit among them
        return self

    def replace(self, **changes: Any) -> JobOptions:
        """A copy with ``changes``, checked like the original (``model_copy`` would not check)."""
        return type(self).model_validate({**self.model_dump(), **changes})
