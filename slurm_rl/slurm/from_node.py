"""What a job's own processes on its nodes ask of SLURM (the bootstrap, a worker, the stale-dir
sweep): each call bounded, through the one runner (runner.py), and None where SLURM does not
answer or is not installed there: the caller asks again later, or goes without."""

from __future__ import annotations

from collections.abc import Sequence

from ..core.errors import SlurmCommandError, UsageError
from .runner import Completed, subprocess_runner


def _ask(argv: Sequence[str], timeout_s: float) -> Completed | None:
    try:
        return subprocess_runner(argv, timeout_s)
    except (SlurmCommandError, UsageError):  # no answer in time; no such command on this node
        return None


def job_record_line(job_id: str, timeout_s: float = 10) -> str | None:
    """``scontrol show job -o JOB``: the job's one-line record; None without an answer."""
    res = _ask(["scontrol", "show", "job", "-o", job_id], timeout_s)
    return res.stdout if res is not None and res.returncode == 0 else None


def jobs_on_node(node: str, timeout_s: float = 20) -> set[str] | None:
    """The ids of the jobs SLURM runs on ``node`` (a sweep's task as ARRAY_TASK, a heterogeneous
    job's components as its leader's id); None when SLURM does not answer."""
    res = _ask(["squeue", "-h", "-w", node, "-o", "%i"], timeout_s)
    if res is None or res.returncode != 0:
        return None
    return {line.strip().split("+")[0] for line in res.stdout.splitlines() if line.strip()}


def cancel_job(job_id: str, timeout_s: float = 30) -> tuple[bool, str]:
    """``scancel JOB`` from one of the job's nodes: (cancelled, why not)."""
    res = _ask(["scancel", job_id], timeout_s)
    if res is None:
        return False, "no scancel here, or no answer from it: the job ends at its time limit"
    return res.returncode == 0, res.stderr.strip()[-300:]
