"""A short step of its own on given nodes, outside any job: a lost job's cleanup (teardown), the
image cache's list and prune. Other jobs usually run there, and SLURM places such a step by its
sharing rule (partitions with OverSubscribe=YES): a step that asks for --oversubscribe goes only
to nodes whose jobs all allow sharing, and one that does not needs a free CPU on each node.
Measured on the lab (26.05, cons_tres): beside a plain 2-CPU job on node1, which left 2 CPUs
free, `srun --oversubscribe` waited its whole --immediate and failed "Requested nodes are busy";
without it, it ran at once. So the step asks without --oversubscribe first, and with it only
when SLURM could not place it (nodes whose CPUs sharing jobs hold).

Its memory is small and explicit: ``--mem=0`` asks for all of each node's memory, which a site
that schedules memory (CR_*_Memory) grants only on a node where no job holds any."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from .runner import Completed

ALLOC_FAILED = "Unable to allocate resources"  # srun's words when it got no allocation
FIRST_WAIT_MAX_S = 15  # how long the plain step waits for its allocation before the second way
STEP_MEM = "256M"  # a cleanup or an image-cache command: one Python or shell process per node

Run = Callable[..., Completed]


def own_step_argv(common: Sequence[str], oversubscribe: bool, wait_s: int) -> list[str]:
    """srun for a short allocation of its own; ``wait_s``: how long it waits for the nodes
    (nodes held whole by other jobs: it says so instead of waiting past the caller's timeout)."""
    return [
        "srun",
        *(["--oversubscribe"] if oversubscribe else []),
        f"--immediate={wait_s}",
        "--time=2",
        "--job-name=slurm-rl-cleanup",
        "--cpus-per-task=1",
        f"--mem={STEP_MEM}",
        *common,
    ]


def run_own_step(
    run: Run, common: Sequence[str], argv: Sequence[str], timeout_s: float, srun_flags: Sequence[str]
) -> Completed:
    """``argv`` once per node in a step of its own: beside other jobs on free CPUs, else, where
    SLURM could not place that, sharing CPUs with jobs that allow it."""
    start = time.monotonic()
    first_wait = int(min(FIRST_WAIT_MAX_S, max(5, timeout_s // 3)))
    res = run([*own_step_argv(common, False, first_wait), *srun_flags, *argv], timeout_s=timeout_s, check=False)
    if res.returncode == 0 or ALLOC_FAILED not in res.stderr:
        return res
    left = max(timeout_s - (time.monotonic() - start), 15.0)
    second = own_step_argv(common, True, max(round(left) - 10, 5))
    return run([*second, *srun_flags, *argv], timeout_s=left, check=False)


def one_task_step(job_name: str, minutes: int, flags: Sequence[str] = ()) -> list[str]:
    """srun of one task on one node, a job of its own named ``job_name`` (doctor's probe), with
    the site's ``flags`` (partition, account, QOS, reservation); the command follows."""
    return ["srun", "--nodes=1", "--ntasks=1", f"--time={minutes}", f"--job-name={job_name}", "--quiet", *flags]
