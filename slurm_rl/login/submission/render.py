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

from ..._version import __version__
from ...config.spec import ClusterSpec
from ...core.exits import REQUESTED_REQUEUE_LIMIT
from ...core.manifest import JOB_ID_PLACEHOLDER, Container, JobManifest
from ...core.options import JobOptions
from ...core.paths import MARKERS_DIR, SECRETS_FILE, JobPaths, image_cache_dir, warned_marker_name
from ...core.retries import FAMILIES, shell_lists
from .directives import member_directives, sbatch_directives
from .parts_render import image_steps, part_nodes
from .plan import JobPlan
from .snapshot import repository_root

TEMPLATE_NAME = "sbatch.sh.j2"
NODE_TEMPLATE_NAME = "node.sh.j2"
SETUP_HEADER = "# spec field 'setup':"


@dataclass(frozen=True)
class RenderedJob:
    script: str
    manifest: JobManifest
    member_script: str = ""  # a member job's batch script (a replacement node, a grown one)


def templates_dir() -> Path:
    """templates/ inside an installed wheel, else the checkout's top-level templates/."""
    here = Path(__file__).resolve().parents[2]  # slurm_rl/
    for candidate in (here / "templates", here.parent / "templates"):
        if (candidate / TEMPLATE_NAME).is_file():
            return candidate
    raise FileNotFoundError(f"no {TEMPLATE_NAME} next to {here}; reinstall slurm-rl")


def _env() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(templates_dir())),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
    )
    env.filters["shq"] = lambda v: shlex.quote(str(v))
    return env


_SAFE = re.compile(r"[\w@%+=:,./-]*")


JOB_KEY = "$SLURM_JOB_ID"
ARRAY_TASK_KEY = "${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID}"  # a sweep's task: 1234_5
MEMBER_KEY = "${SLURM_RL_JOB_DIR##*/}"  # a member job (--heal): the id of the job it joins


def shell_words(argv: list[str], key: str = JOB_KEY) -> list[str]:
    """Shell-quote argv items; in ``--flag=value`` items (made by slurm-rl, never user text)
    the job id placeholder becomes ``"...$SLURM_JOB_ID"`` (``key``: the shell spelling of the
    job dir's id)."""
    out = []
    for item in argv:
        if JOB_ID_PLACEHOLDER in item and _SAFE.fullmatch(item.replace(JOB_ID_PLACEHOLDER, "")):
            flag, _, value = item.partition("=")
            out.append(f'{flag}="{value.replace(JOB_ID_PLACEHOLDER, key)}"')
        elif JOB_ID_PLACEHOLDER in item:  # an awkward path: quote the pieces around the id
            out.append(shell_word(item, key))
        else:
            out.append(shlex.quote(item))
    return out


def shell_word(item: str, key: str = JOB_KEY) -> str:
    """One word for the shell, its job id placeholder(s) ``key``, the pieces around quoted."""
    return f'"{key}"'.join(shlex.quote(p) if p else "" for p in item.split(JOB_ID_PLACEHOLDER))


def _manifest(spec: ClusterSpec, opts: JobOptions, setup_first_line: int, container: Container) -> JobManifest:
    return JobManifest(
        **opts.model_dump(),
        slurm_rl_version=__version__,
        cluster_name=spec.cluster_name,
        experiment_src_dir=str(Path(opts.experiment).parent) if opts.experiment else "",
        setup=tuple(spec.setup),
        node_type_from_node_name=dict(spec.node_type_from_node_name),
        gpu_type_from_node_name=dict(spec.gpu_type_from_node_name),
        setup_first_line=setup_first_line,
        container=container,
        node_local_dir=spec.node_local_dir,
        network_interface=spec.network_interface or "",
        snapshot_root=str(repository_root(Path(opts.experiment))) if opts.snapshot and opts.experiment else "",
    )


def retry_context(retry_on: str | None, exclude: str | None) -> dict[str, str]:
    """What finalize's retry decision needs: --retry-on's causes and exit codes (core/retries.py),
    the causes that name a node's own fault (a retry goes without it), the job's own excludes."""
    kinds, exits = shell_lists(retry_on)
    return {
        "retry_on": shlex.quote(retry_on or ""),
        "retry_kinds": kinds,
        "retry_exits": exits,
        "node_faults": " ".join(FAMILIES["node"]),
        "exclude": shlex.quote(exclude or ""),  # kept excluded beside the bad nodes
    }


def finalize_files() -> dict[str, str]:
    """The job-dir files the batch script's finalize reads and writes, relative to the job dir
    (``requeue_request`` is a prefix: the attempt number follows)."""
    paths = JobPaths(Path("/J"))
    files = {
        "events": paths.events,
        "exit_code": paths.exit_code,
        "exit_reason": paths.exit_reason,
        "exit_cause": paths.exit_cause,
        "bad_nodes": paths.bad_nodes,
        "batch_log": paths.batch_log,
        "requeue_request": paths.requeue_request(""),
        "chain_jobs": paths.chain_jobs,
        "chain_finished": paths.chain_finished,
        "image_cache": paths.image_cache_script,
        "enroot_config": paths.enroot_config,
        "members": paths.members,
        "member_script": paths.member_script,
        "member_log": paths.member_log(""),
        "services_stop": paths.services_stop,
        "cleanup_script": paths.cleanup_script,
        "start_go": paths.start_go,
    }
    return {name: shlex.quote(str(p.relative_to(paths.job_dir))) for name, p in files.items()}


def render_job(plan: JobPlan) -> RenderedJob:
    """The sbatch script and the manifest of the submission ``plan`` (login/submission/plan.py). Pure: no
    I/O besides reading templates."""
    spec, opts = plan.spec, plan.opts
    name_dir = JobPaths.for_job(spec.fileroot, opts.user, opts.name, 0).name_dir
    container = plan.container
    runtime = plan.runtime
    workdir = container.workdir or f"{name_dir}/{JOB_ID_PLACEHOLDER}"
    runtime_flags, prefix = runtime.launch(container, workdir)
    srun_flags = [*runtime_flags, *opts.srun_args]
    python = shlex.quote(opts.python)
    key = ARRAY_TASK_KEY if opts.array else JOB_KEY
    image_flags = runtime.shell_flags(container)
    launch = " ".join([*shell_words(prefix, key), 'bash -c "$SLURM_RL_NODE_SCRIPT"'])
    het_components = [1, opts.nodes] if opts.head_partition else []
    step_flags = [*shell_words(srun_flags, key), *image_flags]
    step_once: list[str] = []
    if runtime.step_wide_flags and (opts.head_partition or opts.parts):  # SPANK options: once per srun
        step_once, step_flags = [*shell_words(runtime_flags, key), *image_flags], shell_words([*opts.srun_args], key)
    step_components: list = het_components
    if opts.parts:  # one component per part with nodes, its container
        step_components = [{"nodes": n, "flags": step_flags, "command": launch} for n in part_nodes(opts.parts)]
        het_components, step_flags = [c["nodes"] for c in step_components], []
    context = dict(
        version=__version__,
        spec=spec,
        directives=sbatch_directives(opts, name_dir),
        name_dir=str(name_dir),
        job_key=key,
        array=bool(opts.array),
        env=sorted(spec.public_env.items()),
        srun_flags=[*shell_words(srun_flags, key), *image_flags],
        step_flags=step_flags,
        step_once_flags=step_once,
        image_steps=image_steps(plan, workdir, lambda argv: shell_words(argv, key)),
        step_components=step_components,
        runtime_prepare=runtime.prepare_template(container),
        image=shlex.quote(container.image or ""),
        image_cache_mb=container.cache_mb,
        image_meta=shlex.quote(image_cache_dir(spec.node_local_dir)),
        secrets=sorted(spec.secret_env),
        secrets_file=SECRETS_FILE,
        launch=launch,
        files=finalize_files(),
        node_temp=shell_word(container.temp_dir(JOB_ID_PLACEHOLDER), key),
        runtime_leftovers=shlex.quote(runtime.leftovers_shell() if runtime.contained else ""),
        runtime_requeue_cleanup=runtime.requeue_cleanup(),  # a requeue first removes the attempt's containers
        requeue=opts.requeue,
        **retry_context(opts.retry_on, opts.exclude),
        preflight_exclude=opts.preflight and opts.on_bad_node == "exclude",
        stall_fails=opts.stall_action == "fail",  # a stall under --stall-action fail is never requeued
        chain=opts.chain > 1 or bool(opts.run_dir),
        run_dir=shlex.quote(opts.run_dir) if opts.run_dir else '"$SLURM_RL_JOB_DIR"',
        requested_limit=REQUESTED_REQUEUE_LIMIT,
        setup=spec.setup,
        het_components=het_components,
        node_command=f'{python} -m slurm_rl.job.node --job-dir "$SLURM_RL_JOB_DIR"',
        python=python,
        python_hint=shlex.quote(runtime.python_hint(container)),
        warned_marker=shlex.quote(f"{MARKERS_DIR}/") + warned_marker_name('"${SLURM_RESTART_COUNT:-0}"'),
        started_markers=shlex.quote(f"{MARKERS_DIR}/") + '"${SLURM_RESTART_COUNT:-0}"-*.started',
        total_nodes=sum(het_components) if opts.parts else opts.total_nodes,  # every task's bootstrap
        heal=opts.heal,
        start_gate_s=opts.start_gate_s,
        member=False,
    )
    env = _env()
    node_script = env.get_template(NODE_TEMPLATE_NAME).render(**context).splitlines()
    setup_first_line = node_script.index(SETUP_HEADER) + 2  # bash numbers lines from 1
    script = env.get_template(TEMPLATE_NAME).render(**context)
    member = ""
    # a member job's script (--heal's replacements, `slurm-rl grow`), staged for every job but a
    # heterogeneous one; the member's steps name the job dir it joins, never their own job id
    if not opts.head_partition and not opts.parts:
        member = env.get_template(TEMPLATE_NAME).render(
            **{
                **context,
                "member": True,
                "directives": member_directives(opts, name_dir),
                "srun_flags": [*shell_words(srun_flags, MEMBER_KEY), *image_flags],
                "launch": " ".join([*shell_words(prefix, MEMBER_KEY), 'bash -c "$SLURM_RL_NODE_SCRIPT"']),
            }
        )
    return RenderedJob(script, _manifest(spec, opts, setup_first_line, container), member)


def render_sbatch(plan: JobPlan) -> str:
    """The sbatch script of the submission ``plan`` (what `slurm-rl render` prints)."""
    return render_job(plan).script
