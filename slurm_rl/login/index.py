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

from ..core.paths import JobPaths

INDEX_ENV = "SLURM_RL_INDEX"


def index_path() -> Path:
    if os.environ.get(INDEX_ENV):
        return Path(os.environ[INDEX_ENV])
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
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


def entries() -> list[dict[str, object]]:
    """Every indexed job whose job dir still exists, newest first, one entry per job id."""
    try:
        lines = index_path().read_text().splitlines()
    except OSError:
        return []
    seen: dict[str, dict[str, object]] = {}
    for line in lines:
        try:
            item = json.loads(line)
            seen[str(item["job_id"])] = item
        except (ValueError, KeyError, TypeError):
            continue
    alive = [e for e in seen.values() if JobPaths(Path(str(e["job_dir"]))).manifest.exists()]
    return sorted(alive, key=lambda e: float(str(e.get("submitted") or 0)), reverse=True)


def lookup(job_id: int | str) -> JobPaths | None:
    for e in entries():
        if str(e["job_id"]) == str(job_id):
            return JobPaths(Path(str(e["job_dir"])))
    return None
