"""`slurm-rl run`: the same driver without SLURM, on an embedded local Ray.

The driver runs as a child process with no RAY_ADDRESS, so ``init_ray()`` starts a fresh local
cluster; or, given an existing cluster (``--ray-address``, a spec with cluster_type "ray"),
attaches there, and the end of the run removes only what the run created (Ray drops a driver's
actors and placement groups when it exits; its worker processes carry the run's marker): never
the cluster. The run gets a job dir under the spec's fileroot like a SLURM job, and everything the
driver started (the local Ray included) is stopped when it ends: the same marker variable
identifies its processes.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from .._version import __version__
from ..config.spec import ClusterSpec
from ..core.ending import driver_cause
from ..core.errors import UsageError
from ..core.events import append_event
from ..core.exits import describe_returncode, driver_log_tail, record_exit, shell_exit_code
from ..core.job_env import (
    EXTERNAL_RAY_ENV,
    JOB_DIR_ENV,
    RAY_ADDRESS_ENV,
    RAY_AUTH_MODE_ENV,
    RAY_AUTH_TOKEN_PATH_ENV,
    RUN_DIR_ENV,
    ray_token_env,
)
from ..core.manifest import JobManifest
from ..core.paths import JobPaths
from ..core.procs import MARKER_ENV, stop_job_processes
from .reading import index
from .submission.submit import write_token
from .submission.user_dir import own_user_dir


def external_ray_env(spec: ClusterSpec, ray_address: str | None, environ: dict[str, str]) -> dict[str, str]:
    """What the driver needs to use an existing Ray cluster (--ray-address, or a spec with
    cluster_type "ray"): its address and, when it uses token auth, the token."""
    address = ray_address or spec.ray_head_node_address
    if not address:
        return {}
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        raise UsageError(f"--ray-address {address!r}: use HOST:PORT of the Ray head's GCS, e.g. 10.0.0.5:6379")
    env = {EXTERNAL_RAY_ENV: address, RAY_ADDRESS_ENV: address}  # plain ray.init() in the driver finds it too
    if spec.ray_auth_token_file:
        token = Path(os.path.expanduser(spec.ray_auth_token_file))
        if not token.is_file():
            raise UsageError(f"ray_auth_token_file: {token} does not exist; point it at the cluster's token file")
        env.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN_PATH=str(token))
    elif environ.get("RAY_AUTH_TOKEN") or environ.get(RAY_AUTH_TOKEN_PATH_ENV):
        env[RAY_AUTH_MODE_ENV] = "token"
    return env


def run_local(
    spec: ClusterSpec,
    experiment: str,
    args: tuple[str, ...],
    name: str | None,
    user: str,
    ray_address: str | None = None,
) -> int:
    exp = Path(experiment)
    if not exp.is_file():
        raise UsageError(
            f"experiment {experiment!r} does not exist or is not a file; pass the path of your driver script"
        )
    external = external_ray_env(spec, ray_address, dict(os.environ))
    run_id = f"local-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
    own_user_dir(spec.fileroot, user)
    paths = JobPaths.for_job(spec.fileroot, user, name or exp.stem, run_id)
    paths.logs.mkdir(parents=True, exist_ok=True)
    shutil.copy2(exp, paths.experiment)
    # A job like any other: its manifest and an index line, so status, logs, plot and list know it
    manifest = JobManifest(
        slurm_rl_version=__version__,
        cluster_name=spec.cluster_name,
        experiment=str(exp.resolve()),
        experiment_args=tuple(args),
        user=user,
        workdir=os.getcwd(),
        python=sys.executable,
        name=paths.name_dir.name,
        experiment_src_dir=str(exp.resolve().parent),
    )
    manifest.write(paths.manifest)
    index.record(run_id, paths, spec.cluster_name)
    append_event(paths.events, "submitted", job_id=run_id, nodes=1)
    env = dict(os.environ)
    env.pop(RAY_ADDRESS_ENV, None)
    env.update(external)
    if not external and RAY_AUTH_MODE_ENV not in env:  # the run's own token: Ray neither makes one nor says so
        write_token(paths.ray_auth_token)
        env.update(ray_token_env(paths.ray_auth_token))
    env[MARKER_ENV] = run_id
    env[JOB_DIR_ENV] = env[RUN_DIR_ENV] = str(paths.job_dir)
    where = f"on the Ray cluster at {external[EXTERNAL_RAY_ENV]}" if external else "on an embedded local Ray"
    print(
        f"slurm-rl: local run {run_id} {where}; job dir {paths.job_dir}\n"
        f"  later: slurm-rl logs {run_id}  (or status, plot)",
        file=sys.stderr,
    )
    append_event(paths.events, "driver_start", argv=[sys.executable, str(exp), *args])
    with open(paths.driver_log, "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, str(exp), *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
        )
        try:
            assert proc.stdout is not None
            for chunk in iter(lambda: proc.stdout.read1(65536), b""):  # type: ignore[union-attr,attr-defined]
                sys.stdout.buffer.write(chunk)
                sys.stdout.buffer.flush()
                log.write(chunk)
            rc = proc.wait()
        except KeyboardInterrupt:
            proc.send_signal(signal.SIGINT)
            rc = proc.wait()
    append_event(paths.events, "driver_end", exit_code=rc)
    killed = stop_job_processes(run_id, None, grace_s=1.0)
    append_event(paths.events, "node_cleaned", killed=len(killed))
    tail = driver_log_tail(paths) if rc else ""
    record_exit(paths, shell_exit_code(rc), describe_returncode(rc), driver_cause(rc, False, tail), keep_existing=False)
    from .reading.plots import redraw_after_end

    redraw_after_end(paths)
    return shell_exit_code(rc)
