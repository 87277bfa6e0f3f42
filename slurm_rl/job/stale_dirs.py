"""What jobs that ended without their bootstrap left in the node-local dir: a node that failed
while a job ran keeps the job's temp dir (Ray's sessions) when it comes back with its disk, and
nothing of that job runs there again to remove it. Each node bootstrap removes, at its start,
the temp dirs of this user's jobs that SLURM no longer runs on this node (found by the soak,
bench/soak.py: a node failed and revived). Never on doubt: a dir goes only when it is this
user's, no process on this node belongs to its job, and SLURM listed this node's jobs without
it; when SLURM does not answer, every dir stays."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable

from ..core.paths import NODE_TEMP_PREFIX, node_temp_dir
from ..core.procs import job_processes
from ..slurm.from_node import jobs_on_node


def stale_dirs(root: str, own_job: str, jobs_here: Callable[[], set[str] | None]) -> list[str]:
    """The temp dirs under ``root`` of this user's jobs that no longer run on this node."""
    try:
        jobs = [
            e.name.removeprefix(NODE_TEMP_PREFIX)
            for e in os.scandir(root)
            if e.name.startswith(NODE_TEMP_PREFIX)
            and e.is_dir(follow_symlinks=False)
            and e.stat(follow_symlinks=False).st_uid == os.getuid()
        ]
    except OSError:
        return []
    idle = [j for j in jobs if j != own_job and not job_processes(j, node_temp_dir(j, root))]
    running = jobs_here() if idle else None  # SLURM is asked only when there is something to remove
    return [node_temp_dir(j, root) for j in idle if running is not None and j not in running]


def slurm_jobs_on(node: str) -> Callable[[], set[str] | None]:
    """The ids of the jobs SLURM runs on ``node`` (a sweep's task as ARRAY_TASK, a heterogeneous
    job's components as its leader's id); None when SLURM does not answer."""
    return lambda: jobs_on_node(node)


def remove_stale_dirs(root: str, own_job: str, node: str, say: Callable[[str], None]) -> list[str]:
    removed = stale_dirs(root, own_job, slurm_jobs_on(node))
    for path in removed:
        shutil.rmtree(path, ignore_errors=True)
        say(f"removed {path}: its job no longer runs on {node} (it ended without its cleanup here: the node failed?)")
    return removed
