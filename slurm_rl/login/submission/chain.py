"""``--chain K``: a run longer than the time limit, as up to K jobs that start one after the
other (``--dependency=afterany:<previous>``) and share one run directory, the first job's dir.

Each job's driver finds it as ``slurm_rl.run_dir()`` (``$SLURM_RL_RUN_DIR``), resumes from the
checkpoint it finds there and checkpoints there. The batch script's finalize (plain shell)
ends the chain: once a driver exits 0 (the run is finished) or fails by itself, it cancels the
chain's later jobs (``chain_jobs`` in the run dir lists them), so nothing is left pending; a
time limit, a lost node or ``slurm_rl.requeue()`` hand over to the next job. A job that starts
after the run finished exits at once.
"""

from __future__ import annotations

from pathlib import Path

from ...config.spec import ClusterSpec
from ...core.events import write_atomic
from ...core.paths import JobPaths
from ...slurm import SlurmClient
from .resolve import JobOptions, changed
from .submit import Submitted, submit


def submit_chain(spec: ClusterSpec, opts: JobOptions, client: SlurmClient, release: bool = True) -> list[Submitted]:
    """Submit the chain held, record its ids in the first job's dir (the run dir), release."""
    jobs = [submit(spec, opts, client, release=False)]
    run_dir = jobs[0].paths.job_dir
    try:
        for _ in range(opts.chain - 1):
            later = changed(opts, run_dir=str(run_dir), dependency=f"afterany:{jobs[-1].job_id}")
            jobs.append(submit(spec, later, client, release=False))
    except BaseException:
        for job in jobs:  # all or nothing: a half-submitted chain would resume nothing
            client.scancel(job.job_id)
        raise
    write_atomic(JobPaths(run_dir).chain_jobs, "".join(f"{j.job_id}\n" for j in jobs))
    if release:
        for job in jobs:
            client.release(job.job_id)
    return jobs


def chain_finished(run_dir: Path) -> bool:
    return JobPaths(run_dir).chain_finished.exists()
