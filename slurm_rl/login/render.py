"""Render a job: pure (spec + options -> sbatch script text + job manifest), deterministic,
byte-for-byte what ``submit`` runs. Decisions live here; the templates only lay them out, and
every value they interpolate goes through the ``shq`` filter (shell quoting).
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import jinja2

from .. import __version__
from ..core.manifest import JOB_ID_PLACEHOLDER, Container, JobManifest
from ..core.paths import MARKERS_DIR, JobPaths, warned_marker_name
from ..core.spec import ClusterSpec
from .options import JobOptions

TEMPLATE_NAME = "sbatch.sh.j2"
NODE_TEMPLATE_NAME = "node.sh.j2"
SETUP_HEADER = "# spec field 'setup':"


@dataclass(frozen=True)
class RenderedJob:
    script: str
    manifest: JobManifest


def templates_dir() -> Path:
    """templates/ inside an installed wheel, else the checkout's top-level templates/."""
    here = Path(__file__).resolve().parent.parent
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


def sbatch_directives(opts: JobOptions, name_dir: Path) -> list[str]:
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


def container_for(spec: ClusterSpec, opts: JobOptions) -> Container:
    image = opts.container_image or (spec.gpu_image if opts.gpus_per_node > 0 else spec.cpu_image)
    return Container(runtime=spec.container_runtime, image=image, workdir=opts.workdir, gpus=opts.gpus_per_node > 0,
                     mounts=(*spec.mounts, f"{spec.fileroot}:{spec.fileroot}"))


_SAFE = re.compile(r"[\w@%+=:,./-]*")


def shell_words(argv: list[str]) -> list[str]:
    """Shell-quote argv items; in ``--flag=value`` items (made by slurm-rl, never user text)
    the job id placeholder becomes ``"...$SLURM_JOB_ID"``."""
    out = []
    for item in argv:
        if JOB_ID_PLACEHOLDER in item:
            flag, _, value = item.partition("=")
            if not _SAFE.fullmatch(item.replace(JOB_ID_PLACEHOLDER, "")):
                raise ValueError(f"not a plain --flag=value item: {item!r}")
            out.append(f'{flag}="{value.replace(JOB_ID_PLACEHOLDER, "$SLURM_JOB_ID")}"')
        else:
            out.append(shlex.quote(item))
    return out


def _manifest(spec: ClusterSpec, opts: JobOptions, setup_first_line: int) -> JobManifest:
    return JobManifest(
        slurm_rl_version=__version__, cluster_name=spec.cluster_name, name=opts.name, user=opts.user,
        nodes=opts.nodes, python=opts.python, workdir=opts.workdir,
        experiment_src_dir=str(Path(opts.experiment).parent), experiment_args=tuple(opts.experiment_args),
        ready_timeout_s=opts.ready_timeout_s, port_base=opts.port_base, requeue=opts.requeue, signal=opts.signal,
        cpus_per_node=opts.cpus_per_node, gpus_per_node=opts.gpus_per_node, time=opts.time,
        partition=opts.partition, account=opts.account, setup=tuple(spec.setup),
        setup_first_line=setup_first_line, container=container_for(spec, opts))


def render_job(spec: ClusterSpec, opts: JobOptions) -> RenderedJob:
    """The sbatch script and the manifest of a job. Pure: no I/O besides reading templates."""
    name_dir = JobPaths.for_job(spec.fileroot, opts.user, opts.name, 0).name_dir
    container = container_for(spec, opts)
    srun_flags, prefix = container.launch(JOB_ID_PLACEHOLDER)
    python = shlex.quote(opts.python)
    context = dict(
        version=__version__, spec=spec, directives=sbatch_directives(opts, name_dir), name_dir=str(name_dir),
        env=sorted({**spec.env, **dict(opts.extra_env)}.items()), srun_flags=shell_words(srun_flags),
        launch=" ".join([*shell_words(prefix), 'bash -c "$SLURM_RL_NODE_SCRIPT"']),
        finalize=f"{python} -m slurm_rl.job.finalize", setup=spec.setup,
        node_command=f'{python} -m slurm_rl.job.node --job-dir "$SLURM_RL_JOB_DIR"',
        warned_marker=shlex.quote(f"{MARKERS_DIR}/") + warned_marker_name('"${SLURM_RESTART_COUNT:-0}"'),
    )
    env = _env()
    node_script = env.get_template(NODE_TEMPLATE_NAME).render(**context).splitlines()
    setup_first_line = node_script.index(SETUP_HEADER) + 2  # bash numbers lines from 1
    script = env.get_template(TEMPLATE_NAME).render(**context)
    return RenderedJob(script, _manifest(spec, opts, setup_first_line))


def render_sbatch(spec: ClusterSpec, opts: JobOptions) -> str:
    """The sbatch script of a job (what `slurm-rl render` prints)."""
    return render_job(spec, opts).script
