"""Render the sbatch script: pure (spec + options -> text), deterministic, byte-for-byte what
``submit`` runs. Decisions live here; the template only lays them out, and every value it
interpolates goes through the ``shq`` filter (shell quoting).
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import jinja2

from . import __version__
from .options import JobOptions
from .paths import JobPaths
from .spec import ClusterSpec

TEMPLATE_NAME = "sbatch.sh.j2"
# Line of the node script (the heredoc in the template) that holds the first setup line; the
# bootstrap uses it to name the setup line that failed.
SETUP_FIRST_LINE = 5


def templates_dir() -> Path:
    """templates/ inside an installed wheel, else the checkout's top-level templates/."""
    here = Path(__file__).resolve().parent
    for candidate in (here / "templates", here.parent / "templates"):
        if (candidate / TEMPLATE_NAME).is_file():
            return candidate
    raise FileNotFoundError(f"no {TEMPLATE_NAME} next to {here}; reinstall slurm-rl")


def _env() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(templates_dir())),
        undefined=jinja2.StrictUndefined, keep_trailing_newline=True,
        trim_blocks=True, lstrip_blocks=True, autoescape=False,
    )
    env.filters["shq"] = lambda v: shlex.quote(str(v))
    return env


def sbatch_directives(spec: ClusterSpec, opts: JobOptions, name_dir: Path) -> list[str]:
    """``#SBATCH`` values, sorted so the script is stable. Values are shell-quoted."""
    d: dict[str, str | None] = {
        "--job-name": opts.name,
        "--nodes": str(opts.nodes),
        "--ntasks-per-node": "1",
        "--output": f"{name_dir}/%j/logs/batch.log",
        "--open-mode": "append",
        "--partition": opts.partition,
        "--account": opts.account,
        "--time": opts.time,
        "--cpus-per-task": str(opts.cpus_per_node) if opts.cpus_per_node else None,
        "--gpus-per-node": str(opts.gpus_per_node) if opts.gpus_per_node else None,
        "--signal": opts.signal or None,
    }
    out = [f"{k}={shlex.quote(v)}" for k, v in sorted(d.items()) if v is not None]
    if opts.oversubscribe:
        out.append("--oversubscribe")
    out.append("--requeue" if opts.requeue > 0 else "--no-requeue")
    return sorted(out)


def container_args(spec: ClusterSpec, opts: JobOptions, job_dir_expr: str) -> tuple[list[str], list[str]]:
    """(extra srun flags, command prefix) for the spec's container runtime."""
    image = opts.container_image or (spec.gpu_image if opts.gpus_per_node > 0 else spec.cpu_image)
    mounts = spec.mounts + [f"{spec.fileroot}:{spec.fileroot}"]
    if spec.container_runtime == "pyxis":
        return ([
            f"--container-image={shlex.quote(str(image))}",
            f"--container-mounts={shlex.quote(','.join(mounts))}",
            '--container-name="slurm-rl-$SLURM_JOB_ID"',
            "--no-container-mount-home",
            f"--container-workdir={shlex.quote(opts.workdir)}",
        ], [])
    if spec.container_runtime == "apptainer":
        prefix = ["apptainer", "exec", "--containall", "--pwd", shlex.quote(opts.workdir)]
        for m in mounts:
            prefix += ["--bind", shlex.quote(m)]
        if opts.gpus_per_node > 0:
            prefix.append("--nv")
        prefix.append(shlex.quote(str(image)))
        return [], prefix
    return [], []


def node_command(spec: ClusterSpec, opts: JobOptions) -> str:
    """The bootstrap command line every node runs after the spec's setup lines (without the
    experiment arguments, which are exported in SLURM_RL_EXPERIMENT_ARGS)."""
    args = [shlex.quote(opts.python), "-m", "slurm_rl.node", '--job-dir "$SLURM_RL_JOB_DIR"',
            "--nodes", str(opts.nodes), "--ready-timeout-s", f"{opts.ready_timeout_s:g}"]
    if opts.port_base is not None:
        args += ["--port-base", str(opts.port_base)]
    return " ".join(args)


def render_sbatch(spec: ClusterSpec, opts: JobOptions) -> str:
    """The sbatch script of a job. Pure: no I/O besides reading the template."""
    name_dir = JobPaths.for_job(spec.fileroot, opts.user, opts.name, 0).name_dir
    srun_flags, prefix = container_args(spec, opts, "$SLURM_RL_JOB_DIR")
    env = sorted({**spec.env, **dict(opts.extra_env)}.items())
    return _env().get_template(TEMPLATE_NAME).render(
        version=__version__, spec=spec, opts=opts,
        directives=sbatch_directives(spec, opts, name_dir),
        name_dir=str(name_dir), env=env, srun_flags=srun_flags,
        launch=" ".join([*prefix, 'bash -c "$SLURM_RL_NODE_SCRIPT"']),
        finalize=f"{shlex.quote(opts.python)} -m slurm_rl.finalize --requeue {opts.requeue}",
        experiment_args=json.dumps(list(opts.experiment_args)), experiment_src_dir=str(Path(opts.experiment).parent), setup=spec.setup, node_command=node_command(spec, opts),
    )
