"""Submit a job: render, stage the job dir, sbatch (held), name the dir by job id, release.

The job is submitted held so that its job dir (where SLURM writes logs/batch.log) exists under
its final name before the job can start; no race, no guessing the job id.
"""

from __future__ import annotations

import os
import secrets
import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path

from .errors import UsageError
from .events import append_event, write_atomic, write_json
from .options import JobOptions
from .paths import JobPaths
from .render import render_sbatch
from .slurm import SlurmClient
from .spec import ClusterSpec


TOKEN_FILE = "ray_auth_token"


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


def stage_job_dir(stage: Path, spec: ClusterSpec, opts: JobOptions, script: str) -> None:
    (stage / "logs").mkdir(parents=True)
    (stage / "nodes").mkdir()
    write_atomic(stage / "sbatch.sh", script)
    write_token(stage / TOKEN_FILE)
    write_atomic(stage / "spec.json", spec.to_json())
    write_json(stage / "options.json", opts.as_dict())
    shutil.copy2(opts.experiment, stage / "experiment.py")


def submit(spec: ClusterSpec, opts: JobOptions, client: SlurmClient, release: bool = True) -> Submitted:
    if spec.cluster_type != "slurm":
        raise UsageError(f"spec {spec.cluster_name!r} has cluster_type \"local\"; use `slurm-rl run` or a SLURM spec")
    script = render_sbatch(spec, opts)
    name_dir = JobPaths.for_job(spec.fileroot, opts.user, opts.name, 0).name_dir
    try:
        name_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"fileroot: cannot create {name_dir} ({exc.strerror}); set fileroot to a writable shared path") from None
    stage = name_dir / f".stage-{uuid.uuid4().hex[:12]}"
    stage_job_dir(stage, spec, opts, script)
    try:
        job_id = client.sbatch(str(stage / "sbatch.sh"), hold=True)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    paths = JobPaths.for_job(spec.fileroot, opts.user, opts.name, job_id)
    os.rename(stage, paths.job_dir)
    append_event(paths.events, "submitted", job_id=job_id, nodes=opts.nodes)
    if release:
        client.release(job_id)
    return Submitted(job_id, paths, script)
