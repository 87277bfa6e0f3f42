"""init_ray: attach to this job's Ray cluster, or start a local one (see ../shared/API.md)."""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

logger = logging.getLogger(__name__)

SLURM_MANAGED_RESOURCE = "slurm_managed_ray_cluster"
LOCAL_TAG_PREFIX = "srl"
# Launcher variables that break Ray workers (they would think they are MPI/SLURM ranks).
_LAUNCHER_PREFIXES = ("SLURM_", "PMI_", "PMIX_", "OMPI_", "MPI_")


class PY_EXECUTABLES:  # noqa: N801 - the contract's name
    SYSTEM = sys.executable


def worker_env_vars(environ: dict[str, str] | None = None) -> dict[str, str]:
    """The user's environment for workers, minus launcher variables."""
    env = os.environ if environ is None else environ
    return {k: v for k, v in env.items() if not k.startswith(_LAUNCHER_PREFIXES)}


def local_tag(environ: dict[str, str] | None = None) -> str:
    """``srl_tag_<sorted CUDA_VISIBLE_DEVICES>``, or ``srl_tag_ALL`` when unset."""
    env = os.environ if environ is None else environ
    cvd = env.get("CUDA_VISIBLE_DEVICES")
    if cvd is None:
        return f"{LOCAL_TAG_PREFIX}_tag_ALL"
    devices = sorted(d.strip() for d in cvd.split(",") if d.strip())
    return f"{LOCAL_TAG_PREFIX}_tag_{'_'.join(devices)}"


def _record_connected(resources: dict[str, float]) -> None:
    """In a slurm-rl job, add `driver_connected` to events.jsonl (bring-up is measured from it)."""
    job_dir = os.environ.get("SLURM_RL_JOB_DIR")
    if job_dir:
        from ..events import append_event

        append_event(Path(job_dir) / "events.jsonl", "driver_connected",
                     nodes=int(resources.get(SLURM_MANAGED_RESOURCE, 0)))


def init_ray(log_dir: str | None = None) -> str:
    """Attach to the right Ray cluster or start a local one; returns which branch was taken.

    1. a cluster carrying ``slurm_managed_ray_cluster`` (a slurm-rl job): reuse it;
    2. a local cluster carrying this process's tag: reuse it;
    3. otherwise start a fresh local cluster tagged with this process's tag.
    """
    import ray

    runtime_env = {"env_vars": worker_env_vars()}
    tag = local_tag()
    try:
        ray.init(address="auto", log_to_driver=True, runtime_env=runtime_env)
        resources = ray.cluster_resources()
        if SLURM_MANAGED_RESOURCE in resources:
            logger.info("init_ray: connected to a SLURM-managed Ray cluster (%s)", resources)
            _record_connected(resources)
            return "slurm_managed"
        if tag in resources:
            logger.info("init_ray: reusing the local Ray cluster tagged %s", tag)
            return "local_reused"
        logger.info("init_ray: the running Ray cluster is neither SLURM-managed nor tagged %s; starting a new one", tag)
        ray.shutdown()
    except ConnectionError:
        logger.info("init_ray: no running Ray cluster found")
    kwargs = {"_temp_dir": os.path.abspath(log_dir)} if log_dir else {}
    ray.init(log_to_driver=True, include_dashboard=False, runtime_env=runtime_env, resources={tag: 1}, **kwargs)
    logger.info("init_ray: started a local Ray cluster tagged %s", tag)
    return "local_new"
