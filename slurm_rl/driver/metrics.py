"""``slurm_rl.MetricsLog(dir).log(step=..., reward=...)``: one JSON line per call in
``metrics.jsonl`` of the job dir, stamped with the wall time and the job attempt, appended (a
requeued attempt continues the same file). ``slurm-rl plot`` draws it."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from ..core.job_env import JobEnvironment
from ..core.paths import JobPaths


class MetricsLog:
    def __init__(self, job_dir: str | os.PathLike[str]) -> None:
        self.path = JobPaths(Path(job_dir)).metrics
        self.attempt = JobEnvironment.current().attempt

    def event(self, name: str, **fields: Any) -> None:
        """A moment worth a mark on the timeline (e.g. ``workers_ready``): events.jsonl."""
        from ..core.events import append_event

        append_event(JobPaths(self.path.parent).events, name, attempt=self.attempt, **fields)

    def log(self, **values: Any) -> None:
        line = json.dumps({"t": round(time.time(), 3), "attempt": self.attempt, **values})
        with open(self.path, "a") as f:
            f.write(line + "\n")


def read_metrics(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    rows = []
    for line in path.read_text().splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            continue  # a line cut by a kill: the rest is still good
    return rows
