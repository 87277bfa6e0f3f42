"""What a job leaves for its user to take home, and where its dashboard answers: the files that
`fetch` copies (metrics, plots, the driver's log, what the driver wrote to its output dir), as
a directory copy or one tar stream (what the laptop side reads over ssh), and the address of
the job's Ray dashboard as seen from this machine."""

from __future__ import annotations

import shutil
import tarfile
from pathlib import Path
from typing import IO, Any

from ...core.errors import UsageError
from ...core.events import read_json
from ...core.manifest import load_manifest
from ...core.paths import JobPaths
from ...slurm import SlurmClient
from .lookup import JobId


def result_files(paths: JobPaths) -> list[Path]:
    """The job's results, each a path inside its job dir: metrics.jsonl, the plots, the driver's
    log, the manifest and exit files (how it ended) and every file under its output dir."""
    job_dir = paths.job_dir
    picked = [paths.metrics, paths.driver_log, paths.manifest, paths.exit_code, paths.exit_reason, paths.events]
    picked += sorted(job_dir.glob("*.png"))
    if paths.output.is_dir():
        picked += sorted(p for p in paths.output.rglob("*") if p.is_file() and not p.is_symlink())
    return [p for p in picked if p.is_file()]


def copy_results(paths: JobPaths, destination: Path) -> list[Path]:
    """Copy the results under ``destination`` (layout as in the job dir); the copies."""
    out = []
    for src in result_files(paths):
        dst = destination / src.relative_to(paths.job_dir)
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dst)
        out.append(dst)
    return out


def write_results_tar(paths: JobPaths, stream: IO[bytes]) -> int:
    """The results as one gzip'd tar on ``stream`` (names relative to the job dir); how many."""
    files = result_files(paths)
    with tarfile.open(fileobj=stream, mode="w|gz") as tar:
        for src in files:
            tar.add(src, arcname=str(src.relative_to(paths.job_dir)), recursive=False)
    return len(files)


def dashboard_address(job_id: JobId, paths: JobPaths, client: SlurmClient) -> dict[str, Any]:
    """The job's Ray dashboard as this machine reaches it: head node, host, port, URL. One line
    naming the fix for a job without a dashboard, one not running, or one not up yet."""
    if not load_manifest(paths.manifest).wants_dashboard:
        raise UsageError(
            f"job {job_id} was submitted without --dashboard: resubmit with --dashboard (or set "
            f'"dashboard": true in the spec); `slurm-rl attach {job_id} -- ray status` works without it'
        )
    state = client.job_state(job_id)
    if state.finished or state.state == "UNKNOWN":
        raise UsageError(f"job {job_id} has ended ({state.state}): its dashboard ended with it")
    cluster = read_json(paths.cluster)
    if not cluster:
        raise UsageError(f"job {job_id}: its Ray cluster is not up yet; `slurm-rl status {job_id}` says when")
    host, port = str(cluster["head_ip"]), int(cluster["ports"]["dashboard"])
    return {
        "job_id": job_id,
        "head_node": cluster["head_node"],
        "host": host,
        "port": port,
        "url": f"http://{host}:{port}",
        "token_file": str(paths.ray_auth_token),  # where the token is, on the cluster (never its value)
    }
