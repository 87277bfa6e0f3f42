"""The node bootstrap: ``python -m slurm_rl.job.node --job-dir DIR``, started on every node by
the job's one srun. This module parses the arguments and wires the node up: its environment
(node_env.py), its lifecycle (node_lifecycle.py: the role thread, the job's exit) and the signals;
cleanup is node_cleanup.py.

Every bootstrap owns the Ray processes of its node: it is their child subreaper, and whatever
ends the job (driver exit, scancel, time limit, a failed node) it stops exactly the processes
of this job on its node, copies Ray's logs to the job dir and removes the node-local temp dir.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from pathlib import Path

from ..core.causes import LAUNCH_FAILURE, Cause
from ..core.errors import JobError
from ..core.exits import record_exit
from ..core.job_env import JobEnvironment
from ..core.manifest import load_manifest
from ..core.paths import JobPaths
from .context import (
    NodeContext,
    describe_error,  # noqa: F401 - importable here as before
)
from .node_env import become_subreaper, config_dir_env, raise_open_files_limit, set_job_environment  # noqa: F401
from .node_lifecycle import Lifecycle
from .stale_dirs import remove_stale_dirs


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m slurm_rl.job.node", description=__doc__)
    p.add_argument("--job-dir", required=True)
    p.add_argument(
        "--failed-setup-line",
        type=int,
        default=None,
        help="(from the ERR trap) the node script line of the setup line that failed",
    )
    p.add_argument("--failed-setup-rc", type=int, default=None)
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if not JobEnvironment.current().in_slurm_job:
        print("slurm_rl.job.node runs inside a SLURM job step (started by the sbatch script)", file=sys.stderr)
        return 2
    become_subreaper()
    raise_open_files_limit()
    paths = JobPaths(Path(args.job_dir))
    paths.logs.mkdir(parents=True, exist_ok=True)
    paths.markers.mkdir(parents=True, exist_ok=True)
    try:
        manifest = load_manifest(paths.manifest)
    except JobError as exc:  # e.g. an image whose slurm-rl is not the one that submitted the job
        from .._version import __version__

        node = JobEnvironment.current().node
        why = (
            f"{node}: the slurm-rl on this node ({__version__}, {Path(__file__).parent.parent}) cannot read the "
            f"job's manifest ({exc}); the nodes (the container image) need the slurm-rl that submitted the job"
        )
        print(f"slurm-rl: {why}", file=sys.stderr)
        record_exit(paths, 1, why, Cause(LAUNCH_FAILURE, node))
        return 1
    set_job_environment(paths, manifest)
    node = JobEnvironment.current().node
    log = open(paths.node_log(node), "a", buffering=1)  # noqa: SIM115 - lives as long as the process
    ctx = NodeContext.from_environ(dict(os.environ), paths, manifest, log)
    failed = (args.failed_setup_line, args.failed_setup_rc or 1) if args.failed_setup_line is not None else None
    life = Lifecycle(ctx, failed)
    # Everything this node prints (ray start included) goes to logs/node-<name>.log.
    os.dup2(log.fileno(), 1)
    os.dup2(log.fileno(), 2)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGCONT):
        signal.signal(sig, life.signals.handler)
    # The job's warning signal (--signal, USR2) reaches every process of the step. Ignoring it
    # here makes every child (Ray, the driver) inherit "ignore": only a driver that asked for
    # it with slurm_rl.on_preempt(callback) reacts.
    signal.signal(signal.SIGUSR2, signal.SIG_IGN)
    # beside the bring-up: what jobs that ended without their cleanup here left (job/stale_dirs.py)
    threading.Thread(
        target=remove_stale_dirs, args=(manifest.node_local_dir, ctx.job_id, ctx.node, ctx.say), daemon=True
    ).start()
    return life.run()


if __name__ == "__main__":
    sys.exit(main())
