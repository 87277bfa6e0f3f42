"""Finding jobs: a job id (a SLURM job id, or a local run's ``local-...`` id) -> its job dir,
every job of yours newest first, and a job's state (SLURM's, or a local run's from its files).
Local runs are jobs like any other for every command that reads jobs."""

from __future__ import annotations

from pathlib import Path

from ...config.spec import ClusterSpec
from ...core.errors import UnknownJobError
from ...core.exits import read_exit
from ...core.job_ids import LOCAL_PREFIX, JobId, as_slurm_id, is_local, is_slurm_job_id, parse_job_id
from ...core.paths import JobPaths
from ...slurm import JobState, SlurmClient
from ..sweep import find_sweep
from . import index


def find_job_dir(
    job_id: JobId, user: str, client: SlurmClient | None = None, spec: ClusterSpec | None = None
) -> JobPaths:
    """A job's dir from its id alone: the per-user index, else SLURM's record of the job's
    output path (<job dir>/logs/batch.log), else the spec's fileroot. No --spec needed."""
    found = index.lookup(job_id, spec.cluster_name if spec is not None else None)
    sweep = find_sweep(job_id, user, spec) if found is None and isinstance(job_id, int) else None
    if sweep is not None:  # a sweep's array id: its tasks are the jobs (status, sweep-summary and teardown take it)
        tasks = sweep.task_ids
        named = ", ".join(tasks[:4]) + (f", ... {tasks[-1]}" if len(tasks) > 4 else "")
        raise UnknownJobError(
            f"job {job_id} is a sweep of {len(tasks)} task(s), each a job of its own: give one ({named}); "
            f"`slurm-rl status {job_id}` and `slurm-rl sweep-summary {job_id}` show them all"
        )
    if found is None and client is not None and not is_local(job_id):
        out = client.job_output_path(job_id)
        candidate = JobPaths(Path(out).parent.parent) if out else None
        if candidate is not None and candidate.job_id == str(job_id) and readable_manifest(candidate, job_id):
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


def readable_manifest(paths: JobPaths, job_id: JobId) -> bool:
    """Whether the job dir SLURM names holds a manifest you can read; another user's job (its
    dir is theirs alone, mode 0700) is a usage error: no command acts on a job that is not yours."""
    try:
        return paths.manifest.exists()
    except PermissionError:
        owner = paths.job_dir.parent.parent.name
        raise UnknownJobError(
            f"job {job_id} is {owner}'s, not yours: slurm-rl acts only on your own jobs (`slurm-rl list` shows yours)"
        ) from None


def resolve_job(
    text: str | int, user: str, client: SlurmClient | None = None, spec: ClusterSpec | None = None
) -> tuple[JobId, JobPaths]:
    """What every command that takes a JOB argument does first: the id parsed (one usage line
    if it is none), and its job dir found (one line naming where it looked if not)."""
    job_id = parse_job_id(text)
    return job_id, find_job_dir(job_id, user, client, spec)


def status_targets(
    text: str | None, user: str, client: SlurmClient, spec: ClusterSpec | None = None
) -> list[tuple[JobPaths, JobState]]:
    """What `status [JOB]` shows, each job with SLURM's state: every task of a sweep (JOB its
    array id), one job, or (no JOB) your ten most recent jobs."""
    if text is None:
        dirs = all_job_dirs(user, spec)[:10]
    else:
        job_id = parse_job_id(text)
        tasks = find_sweep(job_id, user, spec) if isinstance(job_id, int) else None
        dirs = tasks.task_paths() if tasks is not None else [find_job_dir(job_id, user, client, spec)]
    states = job_states(dirs, client)
    return [(p, states[p.job_id]) for p in dirs]


def job_states(dirs: list[JobPaths], client: SlurmClient) -> dict[str, JobState]:
    """The states of jobs keyed by job id. One job: squeue, else scontrol, else sacct (the
    precise end, TIMEOUT or CANCELLED, even where the site keeps no accounting). Many: two
    SLURM calls for all of them (squeue for those it still queues, sacct for the rest; not
    several per job: a user with 500 jobs waited 50 s), UNKNOWN where SLURM forgot a job (its
    exit files then say how it ended). A local run's from its files, SLURM not asked."""
    slurm_ids = {p.job_id: as_slurm_id(p.job_id) for p in dirs if is_slurm_job_id(p.job_id)}
    many = len(dirs) > 1
    ask = many and bool(slurm_ids)  # only local runs (a laptop without SLURM): nothing to ask
    queued = client.my_queue() if ask else {}
    accounted = client.accounting_table(list(slurm_ids.values())) if ask else {}
    out: dict[str, JobState] = {}
    for p in dirs:
        key = slurm_ids.get(p.job_id)
        if key is None:  # a local run: RUNNING until its exit files say how it ended
            rc, _ = read_exit(p)
            state = "RUNNING" if rc is None else "COMPLETED" if rc == 0 else "FAILED"
            out[p.job_id] = JobState(0, state, "localhost", rc, "local run")
        elif many:
            out[p.job_id] = queued.get(key) or accounted.get(key) or JobState(key, "UNKNOWN")
        else:
            out[p.job_id] = client.job_state(key)
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
    return job_states([paths], client)[paths.job_id]
