"""A small per-user index of submitted jobs (job id -> job dir), so that `status`, `logs`,
`attach` and `teardown` find a job by its id alone, whatever spec submitted it, and `list`
shows the jobs of every spec. One JSON line per job, appended at submit (O_APPEND: no lost
lines from concurrent submits), in ``$SLURM_RL_INDEX`` or ``$XDG_STATE_HOME/slurm_rl/jobs.jsonl``
(default ``~/.local/state/slurm_rl/jobs.jsonl``). Only job dirs that still hold a manifest count.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from ...core.job_env import INDEX_ENV, Settings  # noqa: F401 - importable here as before
from ...core.paths import JobPaths

_LINE = "_line"  # where in the file an entry's line was: the index's own order


def index_path(home: Path | None = None) -> Path:
    """The job index of whoever has HOME (default: this process's user) in this environment."""
    if own := Settings.current().index:
        return Path(own)
    state = os.environ.get("XDG_STATE_HOME") or str((home or Path.home()) / ".local" / "state")
    return Path(state) / "slurm_rl" / "jobs.jsonl"


def record(job_id: int | str, paths: JobPaths, cluster: str) -> None:
    path = index_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        line = (
            json.dumps(
                {
                    "job_id": job_id,
                    "job_dir": str(paths.job_dir),
                    "cluster": cluster,
                    "submitted": round(time.time(), 3),
                }
            )
            + "\n"
        )
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)
    except OSError:
        pass  # an unwritable home must not fail a submit: lookups fall back to SLURM and the spec


def _latest() -> dict[str, dict[str, object]]:
    """The index's last line for each job id (a resubmit's line replaces the first); of two
    clusters' jobs of one id, the newest (``lookup`` and ``clusters_of`` see both)."""
    return {job: items[0] for job, items in _by_id().items()}


def _by_id() -> dict[str, list[dict[str, object]]]:
    """Each job id's last line per cluster, newest first."""
    out: dict[str, list[dict[str, object]]] = {}
    for (job, _), item in _latest_per_cluster().items():
        out.setdefault(job, []).append(item)
    return {job: _newest_first(items) for job, items in out.items()}


def _latest_per_cluster() -> dict[tuple[str, str], dict[str, object]]:
    try:
        lines = index_path().read_text().splitlines()
    except OSError:
        return {}
    seen: dict[tuple[str, str], dict[str, object]] = {}
    for number, line in enumerate(lines):
        try:
            item = json.loads(line)
            seen[(str(item["job_id"]), str(item.get("cluster") or ""))] = {**item, _LINE: number}
        except (ValueError, KeyError, TypeError):
            continue
    return seen


def _alive(item: dict[str, object]) -> bool:
    return JobPaths(Path(str(item["job_dir"]))).manifest.exists()


def _newest_first(items: list[dict[str, object]]) -> list[dict[str, object]]:
    """The order lines were appended in, last first: two submits within a clock tick, or from
    login nodes whose clocks differ, keep the order the file has."""
    return sorted(items, key=lambda e: int(str(e[_LINE])), reverse=True)


def entries() -> list[dict[str, object]]:
    """Every indexed job whose job dir still exists, newest first, one entry per job id and cluster."""
    return _newest_first([e for e in _latest_per_cluster().values() if _alive(e)])


def with_prefix(prefix: str) -> list[dict[str, object]]:
    """The indexed jobs whose id starts with ``prefix`` (a sweep's ``ARRAYID_``) and whose job
    dir still exists, newest first. Only theirs are looked at on disk: a user's index of
    thousands of jobs costs one read, not a stat per job."""
    return _newest_first([e for k, e in _latest().items() if k.startswith(prefix) and _alive(e)])


def lookup(job_id: int | str, cluster: str | None = None) -> JobPaths | None:
    """The job dir of ``job_id`` if the index has it and it still holds a manifest; of several
    clusters' jobs of that id, ``cluster``'s (a spec's cluster_name), else the newest."""
    items = _by_id().get(str(job_id), [])
    ordered = [e for e in items if e.get("cluster") == cluster] + [e for e in items if e.get("cluster") != cluster]
    item = next((e for e in ordered if _alive(e)), None)  # one job dir looked at when it is there
    return JobPaths(Path(str(item["job_dir"]))) if item is not None else None


def clusters_of(job_id: int | str) -> list[str]:
    """The clusters (specs' cluster_name) whose job of this id still has its job dir."""
    return sorted({str(e.get("cluster") or "") for e in _by_id().get(str(job_id), []) if _alive(e)})
