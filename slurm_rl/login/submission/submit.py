"""Submit a job: render, stage the job dir, sbatch (held), name the dir by job id, release.

The job is submitted held so that its job dir (where SLURM writes logs/batch.log) exists under
its final name before the job can start; no race, no guessing the job id.
"""

from __future__ import annotations

import os
import secrets
import shlex
import shutil
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from ...config.spec import ClusterSpec
from ...core.errors import SlurmCommandError, SlurmRlError, UsageError
from ...core.events import append_event, write_atomic
from ...core.options import JobOptions
from ...core.paths import JobPaths
from ...runtimes import runtime_of
from ...slurm import SlurmClient
from ..reading import index
from .plan import resolve_plan
from .preflight import preflight
from .render import RenderedJob, render_job
from .snapshot import SNAPSHOT_DIR, copy_files, copy_snapshot, directory_files
from .user_dir import own_user_dir


def write_private(path: Path, text: str) -> None:
    """A file only its owner can read, created so (never world-readable, not even briefly)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)


def write_token(path: Path) -> None:
    """A fresh Ray auth token for one job. Every node and the driver of the job use it
    (RAY_AUTH_MODE=token); nobody else can talk to the job's Ray."""
    write_private(path, secrets.token_hex(32))


@dataclass(frozen=True)
class Submitted:
    job_id: int
    paths: JobPaths
    script: str


def stage_job_dir(
    stage: JobPaths, spec: ClusterSpec, opts: JobOptions, job: RenderedJob, snapshot: bool = True
) -> None:
    """The job dir, mode 0700: its logs and files can carry secrets. ``snapshot``: copy the
    repository into it (a sweep's tasks share one copy instead)."""
    stage.job_dir.mkdir(mode=0o700)
    stage.job_dir.chmod(0o700)  # whatever the umask
    stage.logs.mkdir()
    stage.markers.mkdir()
    write_atomic(stage.sbatch_script, job.script)
    if job.member_script:  # what --heal's replacements and `slurm-rl grow` submit
        stage.members.mkdir()
        write_atomic(stage.member_script, job.member_script)
    write_token(stage.ray_auth_token)
    write_atomic(stage.cleanup_script, (resources.files("slurm_rl.job") / "cleanup_node.sh").read_text())
    if spec.secret_env:
        write_private(stage.secrets, "".join(f"{k}={shlex.quote(v)}\n" for k, v in sorted(spec.secret_env.items())))
    write_atomic(stage.spec, spec.redacted_json())
    job.manifest.write(stage.manifest)
    if opts.experiment:
        shutil.copy2(opts.experiment, stage.experiment)
    if job.manifest.snapshot_root and snapshot:
        copy_snapshot(Path(job.manifest.snapshot_root), stage.job_dir / SNAPSHOT_DIR)
    elif job.manifest.has_services and job.manifest.experiment_src_dir:  # the services' code, from a laptop too
        src = Path(job.manifest.experiment_src_dir)
        copy_files(src, directory_files(src, "--parts"), stage.job_dir / SNAPSHOT_DIR)
    if job.manifest.own_image_parts:  # their instances' supervisor, run in their images
        stage.services.mkdir()
        write_atomic(stage.service_supervisor, (resources.files("slurm_rl.job") / "service_supervise.sh").read_text())
    runtime_of(job.manifest.container.runtime).stage(job.manifest.container, stage)


def sbatch_refusal(exc: SlurmCommandError) -> SlurmRlError:
    """sbatch's own reason on one line, exit 2, when it refused the job (bad QOS, account,
    constraint, ...); a controller that does not answer stays an error of its own (exit 1)."""
    lines = [ln for ln in exc.stderr.strip().splitlines() if ln.strip()]
    reason = lines[-1].removeprefix("sbatch: error: ").strip() if lines else ""
    if exc.returncode is None or not reason or "contact slurm controller" in reason or "timed out" in reason:
        return exc
    return UsageError(f"sbatch refused the job: {reason}; nothing was submitted")


def make_name_dir(spec: ClusterSpec, opts: JobOptions) -> Path:
    """``<fileroot>/<user>/<name>``, where a job's dir is staged and then named by its id; a
    fileroot that cannot hold it is a usage error naming the fix."""
    own_user_dir(spec.fileroot, opts.user)
    name_dir = JobPaths.for_job(spec.fileroot, opts.user, opts.name, 0).name_dir
    try:
        name_dir.mkdir(exist_ok=True)
    except OSError as exc:
        raise UsageError(
            f"fileroot: cannot create {name_dir} ({exc.strerror}); set fileroot to a writable shared path"
        ) from None
    return name_dir


def submit(
    spec: ClusterSpec,
    opts: JobOptions,
    client: SlurmClient,
    release: bool = True,
    stage_extra: Callable[[JobPaths], None] | None = None,
) -> Submitted:
    """Submit one job; ``stage_extra(paths)`` may add files to the job dir before it can start."""
    if spec.cluster_type != "slurm":
        raise UsageError(
            f"spec {spec.cluster_name!r} has cluster_type {spec.cluster_type!r}: run it with "
            f"`slurm-rl run --spec SPEC EXPERIMENT`, or submit with a SLURM spec"
        )
    plan = resolve_plan(spec, opts, client)  # the submission resolved once: preflight and render read it
    preflight(plan, client)
    spec = plan.spec
    job = render_job(plan)
    name_dir = make_name_dir(spec, opts)
    stage = JobPaths(name_dir / f".stage-{uuid.uuid4().hex[:12]}")
    try:
        stage_job_dir(stage, spec, opts, job)
        if stage_extra is not None:
            stage_extra(stage)
        job_id = client.sbatch(str(stage.sbatch_script), hold=True)
    except SlurmCommandError as exc:
        shutil.rmtree(stage.job_dir, ignore_errors=True)
        raise sbatch_refusal(exc) from None
    except BaseException:
        shutil.rmtree(stage.job_dir, ignore_errors=True)
        raise
    paths = JobPaths.for_job(spec.fileroot, opts.user, opts.name, job_id)
    os.rename(stage.job_dir, paths.job_dir)
    append_event(paths.events, "submitted", job_id=job_id, nodes=opts.total_nodes)
    index.record(job_id, paths, spec.cluster_name)
    if release:
        client.release(job_id)
    return Submitted(job_id, paths, job.script)
