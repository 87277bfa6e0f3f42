"""``slurm_rl.services()``: a job of parts' services as the driver (or any process of the job)
finds them: each service's balanced URL (the head spreads requests over its ready instances and
skips a dead one), its ready instances, and those on this node (a sidecar's own instance)."""

from __future__ import annotations

from pathlib import Path

from ..core.job_env import JobEnvironment
from ..core.manifest import load_manifest
from ..core.paths import JobPaths, node_dir_of_session
from ..core.service_states import JOB_DIR_POINTER, short_host, summary


def job_dir() -> Path | None:
    """The job dir: the driver's environment says it; a Ray worker (no SLURM_* variables) finds
    it through its Ray session's node-local dir (core/service_states.py)."""
    env = JobEnvironment.current()
    if env.job_dir is not None:
        return env.job_dir
    try:
        import ray

        session = ray._private.worker.global_worker.node.get_session_dir_path()  # type: ignore[union-attr]
        return Path((node_dir_of_session(session) / JOB_DIR_POINTER).read_text().strip())
    except Exception:  # noqa: BLE001 - not in a job's Ray: None
        return None


def services() -> dict[str, dict]:
    """``{NAME: {"url": "http://HOST:PORT", "instances": [...], "here": [...], "ready": n,
    "total": n}}``; ``{}`` in a job without services. ``here``: this node's ready instances
    (a sidecar's own); works in the driver and in the job's Ray workers."""
    found = job_dir()
    if found is None:
        raise RuntimeError("slurm_rl.services(): not inside a slurm-rl job (no job dir: SLURM_RL_JOB_DIR is unset)")
    paths = JobPaths(found)
    parts = load_manifest(paths.manifest).parts
    node = short_host(JobEnvironment.current().node)  # SLURMD_NODENAME, else the host name
    out = {}
    for name, seen in summary(paths.services, parts).items():
        here = {short_host(n): urls for n, urls in seen["by_node"].items()}.get(node, [])
        out[name] = {
            "url": seen["url"],
            "instances": seen["instances"],
            "here": here,
            "ready": seen["ready"],
            "total": seen["total"],
        }
    return out
