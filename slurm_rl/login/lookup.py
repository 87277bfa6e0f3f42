"""Finding jobs: a job id (a SLURM job id, or a local run's ``local-...`` id) -> its job dir,
every job of yours newest first, and a job's state (SLURM's, or a local run's from its files).
Local runs are jobs like any other for every command that reads jobs."""

from __future__ import annotations

from pathlib import Path

from ..config.spec import ClusterSpec
from ..core.errors import UnknownJobError
from ..core.exits import read_exit
from ..core.job_ids import LOCAL_PREFIX, JobId, as_slurm_id, is_local, is_slurm_job_id, parse_job_id
from ..core.paths import JobPaths
from ..slurm import JobState, SlurmClient
from . import index


def find_job_dir(
    job_id: JobId, user: str, client: SlurmClient | None = None, spec: ClusterSpec | None = None
) -> JobPaths:
    """A job's dir from its id alone: the per-user index, else SLURM's record of the job's
    output path (<job dir>/logs/batch.log), else the spec's fileroot. No --spec needed."""
    found = index.lookup(job_id)
    if found is None and client is not None and not is_local(job_id):
        out = client.job_output_path(job_id)
        candidate = JobPaths(Path(out).parent.parent) if out else None
        if candidate is not None and candidate.manifest.exists() and candidate.job_id == str(job_id):
            found = candidate
    if found is None and spec is not None:
        matches = sorted((Path(spec.fileroot) / user).glob(f"*/{job_id}"))
        found = JobPaths(matches[0]) if matches else None
    if found is None:
        raise UnknownJobError(
            f"job {job_id}: no slurm-rl job dir found (not in {index.index_path()}, not known to "
            f"SLURM with a slurm-rl log path{'' if spec is None else f', not under {spec.fileroot}/{user}'}); "
            f"is it your job? (`slurm-rl list` shows yours)"
        )
    return found


def resolve_job(
    text: str | int, user: str, client: SlurmClient | None = None, spec: ClusterSpec | None = None
) -> tuple[JobId, JobPaths]:
    """What every command that takes a JOB argument does first: the id parsed (one usage line
    if it is none), and its job dir found (one line naming where it looked if not)."""
    job_id = parse_job_id(text)
    return job_id, find_job_dir(job_id, user, client, spec)


def job_states(dirs: list[JobPaths], client: SlurmClient) -> dict[str, JobState]:
    """The states of many jobs in two SLURM calls for all of them (squeue for those it still
    queues, sacct for the rest; not several per job: a user with 500 jobs waited 50 s): keyed by
    job id; UNKNOWN where SLURM forgot a job (its exit files then say how it ended); a local
    run's from its files."""
    queued = client.my_queue()
    accounted = client.accounting_table([as_slurm_id(p.job_id) for p in dirs if is_slurm_job_id(p.job_id)])
    out: dict[str, JobState] = {}
    for p in dirs:
        if is_slurm_job_id(p.job_id):
            key = as_slurm_id(p.job_id)
            out[p.job_id] = queued.get(key) or accounted.get(key) or JobState(key, "UNKNOWN")
        else:
            out[p.job_id] = job_state_for(p, client)
    return out


def all_job_dirs(user: str, spec: ClusterSpec | None = None) -> list[JobPaths]:
    """Your jobs and local runs of every spec (the index), plus any under ``spec``'s fileroot;
    newest first. Only directories with a slurm-rl manifest count."""
    dirs = {e["job_dir"]: JobPaths(Path(str(e["job_dir"]))) for e in index.entries()}
    if spec is not None:
        for p in (Path(spec.fileroot) / user).glob("*/*"):
            if (
                p.is_dir()
                and (is_slurm_job_id(p.name) or p.name.startswith(LOCAL_PREFIX))
                and JobPaths(p).manifest.exists()
            ):
                dirs.setdefault(str(p), JobPaths(p))
    return sorted(dirs.values(), key=lambda p: p.manifest.stat().st_mtime, reverse=True)


def job_state_for(paths: JobPaths, client: SlurmClient) -> JobState:
    """SLURM's state of a submitted job; a local run's from its exit files (RUNNING until then)."""
    if not paths.job_id.startswith(LOCAL_PREFIX):
        return client.job_state(as_slurm_id(paths.job_id))
    rc, _ = read_exit(paths)
    state = "RUNNING" if rc is None else "COMPLETED" if rc == 0 else "FAILED"
    return JobState(0, state, "localhost", rc, "local run")
