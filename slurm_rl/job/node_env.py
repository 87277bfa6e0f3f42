"""The bootstrap's own process and environment, before its role starts: child subreaper (Ray's
daemons stay in the job step's tree), the open-files limit, the job's Ray token and tuning,
its node-local temp dir, writable config dirs, and the job marker every child inherits."""

from __future__ import annotations

import ctypes
import os
import resource
from collections.abc import Mapping
from pathlib import Path

from ..core.job_env import TEMP_DIR_ENV, ray_token_env
from ..core.manifest import JobManifest
from ..core.paths import JobPaths
from ..core.procs import MARKER_ENV
from .ray_start import ray_config_env

PR_SET_CHILD_SUBREAPER = 36


def become_subreaper() -> None:
    """Orphaned Ray daemons re-parent to this process, so they stay in this job step's tree."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def raise_open_files_limit() -> int:
    """The open-files soft limit up to the hard limit, for this process and all it starts (Ray
    opens several sockets per worker; sites often leave the soft limit at 1024). Returns it."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        want = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
            soft = want
        except (ValueError, OSError):
            pass
    return soft


def config_dir_env(environ: Mapping[str, str], temp_dir: str) -> dict[str, str]:
    """Where tools keep their caches when the home directory is read-only (a container without
    the home mounted): matplotlib's MPLCONFIGDIR in the job's node-local dir, instead of a
    warning and a new temporary font cache in every process that plots."""
    if "MPLCONFIGDIR" in environ:
        return {}
    config = Path(environ.get("XDG_CONFIG_HOME") or Path(environ.get("HOME") or Path.home()) / ".config")
    probe = config
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    return {} if os.access(probe, os.W_OK) else {"MPLCONFIGDIR": f"{temp_dir}/matplotlib"}


def set_job_environment(paths: JobPaths, manifest: JobManifest) -> None:
    """The variables every process of this node's job inherits."""
    # This job's Ray accepts only clients holding the job's token (written by submit, mode 0600).
    os.environ.update(ray_token_env(paths.ray_auth_token))
    # A lost node is declared dead within NODE_LOST_WINDOW_S (its actors' callers get the error);
    # a large job's GCS is tuned for the registration burst instead (ray_config_env)
    for key, value in ray_config_env(manifest.total_nodes).items():
        os.environ.setdefault(key, value)
    # Where this job keeps node-local files (Ray's temp dir; uv environments of worker groups).
    temp_dir = os.environ[TEMP_DIR_ENV] = manifest.temp_dir(paths.job_id)
    os.environ.update(config_dir_env(os.environ, temp_dir))
    # The marker goes last in the environment children inherit: processes that rewrite their
    # title (Ray's "ray::..." workers) overwrite the start of /proc/PID/environ.
    os.environ.pop(MARKER_ENV, None)
    os.environ[MARKER_ENV] = paths.job_id  # the job dir's id (a hetjob component has its own SLURM_JOB_ID)
