"""The ``#SBATCH`` lines of a job and of its member jobs (--heal), from the resolved options:
sorted within each component so the script is stable, every value shell-quoted."""

from __future__ import annotations

import shlex
from pathlib import Path

from ...core.options import JobOptions


def _quoted(d: dict[str, str | None]) -> list[str]:
    return [f"{k}={shlex.quote(v)}" for k, v in d.items() if v is not None]


def sbatch_fields(scope: str) -> dict[str, str]:
    """Option field -> its ``#SBATCH`` option, for the fields core/options.py marks ``directive=``
    ``scope`` ("job": the job's own, "nodes": its nodes'): a new sbatch option is one field."""
    out = {}
    for name, info in JobOptions.model_fields.items():
        meta = info.json_schema_extra
        if isinstance(meta, dict) and meta.get("directive") == scope:
            out[name] = str(meta["flags"][-1])  # type: ignore[index]
    return out


def _marked(opts: JobOptions, scope: str) -> dict[str, str | None]:
    """The marked fields' directives; an unset (None, "", 0) field has none."""
    return {
        flag: str(v) if (v := getattr(opts, name)) not in (None, "", 0) else None
        for name, flag in sbatch_fields(scope).items()
    }


def _job_level(opts: JobOptions, name_dir: Path) -> tuple[dict[str, str | None], list[str], list[str]]:
    """(the job's own #SBATCH values, its flags, the escape hatch's arguments as given)."""
    job: dict[str, str | None] = {
        "--job-name": opts.name,
        # a sweep's task is named as SLURM names it (<array>_<task>): its job dir, its log
        "--output": f"{name_dir}/{'%A_%a' if opts.array else '%j'}/logs/batch.log",
        "--array": opts.array or None,
        "--open-mode": "append",
        **_marked(opts, "job"),
    }
    flags = (["--oversubscribe"] if opts.oversubscribe else []) + ["--requeue" if opts.requeue > 0 else "--no-requeue"]
    flags += ["--no-kill"] if opts.heal else []  # a failed node leaves the job, which goes on (healing)
    return job, flags, [shlex.join([a]) for a in opts.sbatch_args]


def _gpus(opts: JobOptions, count: int) -> dict[str, str | None]:
    """GPUs per node as SLURM takes them: "[TYPE:]N" for --gpus-per-node, "gpu[:TYPE]:N" in --gres."""
    gpus = f"{opts.gpu_type}:{count}" if opts.gpu_type else str(count or "")
    if not count:
        return {}
    if opts.gpu_request == "gres":
        return {"--gres": ",".join(g for g in (opts.gres, f"gpu:{gpus}") if g)}
    return {"--gpus-per-node": gpus}


def parts_directives(opts: JobOptions, name_dir: Path) -> list[str]:
    """A job of parts (--parts): one heterogeneous component per part with nodes of its own, in
    core/parts.py's order (the head's part first, with the job's own options, as SLURM wants);
    each with its partition, GPUs, CPUs, memory and --exclusive; the site's node options (features,
    GRES, excluded nodes) with every component."""
    from ...core.parts import component_parts

    job, flags, extra = _job_level(opts, name_dir)
    out: list[str] = []
    for i, name in enumerate(component_parts(opts.parts)):
        part = opts.parts[name]
        values: dict[str, str | None] = {
            "--nodes": str(part.nodes),
            "--ntasks-per-node": "1",
            "--partition": part.partition,
            "--time": opts.time,
            "--cpus-per-task": str(part.cpus_per_node) if part.cpus_per_node else None,
            "--mem": part.mem,
            "--mem-per-cpu": opts.mem_per_cpu if not part.mem else None,
            "--constraint": opts.constraint,
            "--gres": opts.gres,
            "--exclude": opts.exclude,
            **_gpus(opts, part.gpus_per_node),
        }
        own = (["--exclusive"] if part.exclusive or opts.exclusive else []) + (flags if i == 0 else [])
        if i:
            out.append("hetjob")
        out += sorted(_quoted({**(job if i == 0 else {}), **values}) + own)
        out += extra if i == 0 else []
    return out


def sbatch_directives(opts: JobOptions, name_dir: Path) -> list[str]:
    """``#SBATCH`` values, sorted within each component so the script is stable, shell-quoted,
    then the escape-hatch arguments as given. With a head partition: one heterogeneous job, the
    head's component, ``hetjob``, the workers' component (job-level options go with the first
    component, as SLURM wants; node options such as --constraint, --gres and --mem with the
    workers, whose nodes they describe)."""
    if opts.parts:
        return parts_directives(opts, name_dir)
    job, flags, extra = _job_level(opts, name_dir)

    # GPUs per node as SLURM takes them: "[TYPE:]N" for --gpus-per-node, "gpu[:TYPE]:N" in --gres
    gpus = f"{opts.gpu_type}:{opts.gpus_per_node}" if opts.gpu_type else str(opts.gpus_per_node or "")
    gres_gpus = f"gpu:{gpus}" if opts.gpus_per_node and opts.gpu_request == "gres" else ""

    def component(partition: str | None, nodes: int, workers: bool) -> dict[str, str | None]:
        out = {
            "--nodes": str(nodes),
            "--ntasks-per-node": "1",
            "--partition": partition,
            "--time": opts.time,
            "--cpus-per-task": str(opts.cpus_per_node) if opts.cpus_per_node else None,
            "--gpus-per-node": gpus if gpus and workers and opts.gpu_request == "gpus-per-node" else None,
        }
        if workers:
            out.update(_marked(opts, "nodes"))
            out["--gres"] = ",".join(g for g in (opts.gres, gres_gpus) if g) or None  # the site's and GPUs
        return out

    exclusive = ["--exclusive"] if opts.exclusive else []
    if not opts.head_partition:
        return [
            *sorted(_quoted({**job, **component(opts.partition, opts.total_nodes, True)}) + flags + exclusive),
            *extra,
        ]
    head = sorted(_quoted({**job, **component(opts.head_partition, 1, False)}) + flags)
    return [*head, *extra, "hetjob", *sorted(_quoted(component(opts.partition, opts.nodes, True)) + exclusive)]


# a member job's own: set by the batch script that submits it (heal.sh.j2), or not its business
_NOT_FOR_MEMBERS = ("--job-name=", "--output=", "--signal=", "--nodes=", "--time=", "--comment=")


def member_directives(opts: JobOptions, name_dir: Path) -> list[str]:
    """A member job's ``#SBATCH`` lines: where and as whom the job runs (partition, account, QOS,
    reservation, constraints, per-node CPUs, memory and GPUs, the escape hatch's options), not
    what makes the job itself (array, dependency, mail, named nodes, segments, requeue)."""
    plain = opts.replace(
        array="",
        dependency=None,
        mail_type=None,
        mail_user=None,
        comment=None,
        segment=None,
        nodelist=None,
        requeue=0,
        stall_action=None,  # (requeue needs --requeue) the job's head watches for stalls
        retry_on=None,  # ... and its batch script decides its retries
        heal=0,
        min_nodes=None,
        head_partition=None,
        head_node="shared",
        nodes=1,
    )
    return [d for d in sbatch_directives(plain, name_dir) if not d.startswith(_NOT_FOR_MEMBERS)]
