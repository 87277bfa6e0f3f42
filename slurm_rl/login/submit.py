"""Submit a job: render, stage the job dir, sbatch (held), name the dir by job id, release.

The job is submitted held so that its job dir (where SLURM writes logs/batch.log) exists under
its final name before the job can start; no race, no guessing the job id.
"""

from __future__ import annotations

import os
import secrets
import shutil
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..core.errors import UsageError
from ..core.events import append_event, write_atomic
from ..core.paths import JobPaths
from ..core.slurm import SlurmClient
from ..core.spec import ClusterSpec
from .options import JobOptions
from .render import RenderedJob, render_job


def write_token(path: Path) -> None:
    """A fresh Ray auth token for one job, readable by its owner only. Every node and the driver
    of the job use it (RAY_AUTH_MODE=token); nobody else can talk to the job's Ray."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(secrets.token_hex(32))


@dataclass(frozen=True)
class Submitted:
    job_id: int
    paths: JobPaths
    script: str


def stage_job_dir(stage: JobPaths, spec: ClusterSpec, opts: JobOptions, job: RenderedJob) -> None:
    stage.logs.mkdir(parents=True)
    stage.markers.mkdir()
    write_atomic(stage.sbatch_script, job.script)
    write_token(stage.ray_auth_token)
    write_atomic(stage.spec, spec.to_json())
    job.manifest.write(stage.manifest)
    shutil.copy2(opts.experiment, stage.experiment)


def submit(spec: ClusterSpec, opts: JobOptions, client: SlurmClient, release: bool = True,
           stage_extra: Callable[[JobPaths], None] | None = None) -> Submitted:
    """Submit one job; ``stage_extra(paths)`` may add files to the job dir before it can start."""
    if spec.cluster_type != "slurm":
        raise UsageError(f"spec {spec.cluster_name!r} has cluster_type \"local\"; use `slurm-rl run` or a SLURM spec")
    job = render_job(spec, opts)
    name_dir = JobPaths.for_job(spec.fileroot, opts.user, opts.name, 0).name_dir
    try:
        name_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"fileroot: cannot create {name_dir} ({exc.strerror}); set fileroot to a writable shared path") from None
    stage = JobPaths(name_dir / f".stage-{uuid.uuid4().hex[:12]}")
    try:
        stage_job_dir(stage, spec, opts, job)
        if stage_extra is not None:
            stage_extra(stage)
        job_id = client.sbatch(str(stage.sbatch_script), hold=True)
    except BaseException:
        shutil.rmtree(stage.job_dir, ignore_errors=True)
        raise
    paths = JobPaths.for_job(spec.fileroot, opts.user, opts.name, job_id)
    os.rename(stage.job_dir, paths.job_dir)
    append_event(paths.events, "submitted", job_id=job_id, nodes=opts.nodes)
    if release:
        client.release(job_id)
    return Submitted(job_id, paths, job.script)
