"""`slurm-rl run`: the same driver without SLURM, on an embedded local Ray.

The driver runs as a child process with no RAY_ADDRESS, so ``init_ray()`` starts a fresh local
cluster. The run gets a job dir under the spec's fileroot like a SLURM job, and everything the
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

from ..core.errors import UsageError
from ..core.events import append_event
from ..core.exits import describe_returncode, record_exit, shell_exit_code
from ..core.paths import JobPaths
from ..core.procs import MARKER_ENV, stop_job_processes
from ..core.spec import ClusterSpec


def run_local(spec: ClusterSpec, experiment: str, args: tuple[str, ...], name: str | None, user: str) -> int:
    exp = Path(experiment)
    if not exp.is_file():
        raise UsageError(f"experiment {experiment!r} does not exist or is not a file; pass the path of your driver script")
    run_id = f"local-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
    paths = JobPaths.for_job(spec.fileroot, user, name or exp.stem, run_id)
    paths.logs.mkdir(parents=True, exist_ok=True)
    shutil.copy2(exp, paths.experiment)
    env = dict(os.environ)
    env.pop("RAY_ADDRESS", None)
    env[MARKER_ENV] = run_id
    env["SLURM_RL_JOB_DIR"] = str(paths.job_dir)
    print(f"slurm-rl: local run {run_id}; job dir {paths.job_dir}", file=sys.stderr)
    append_event(paths.events, "driver_start", argv=[sys.executable, str(exp), *args])
    with open(paths.driver_log, "wb") as log:
        proc = subprocess.Popen([sys.executable, str(exp), *args], env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT)
        try:
            assert proc.stdout is not None
            for chunk in iter(lambda: proc.stdout.read1(65536), b""):  # type: ignore[union-attr]
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
    record_exit(paths, shell_exit_code(rc), describe_returncode(rc), keep_existing=False)
    return shell_exit_code(rc)
