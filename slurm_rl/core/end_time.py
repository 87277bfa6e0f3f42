"""The job's end time as SLURM has it (``scontrol show job``'s ``EndTime``, which ``scontrol
update TimeLimit=...`` moves): node 0 keeps ``<job dir>/end_time.json`` fresh (job/end_time_watch.py),
the driver's ``slurm_rl.time_left()`` and ``slurm-rl status`` read it. One SLURM call per job
every ``REFRESH_S``, from outside any container, whatever the driver asks; a driver in a
container needs no SLURM client."""

from __future__ import annotations

import math
import re
import time
from datetime import datetime
from pathlib import Path

from .events import read_json, write_json

REFRESH_S = 15.0  # how stale the file may be: a changed time limit shows within this


def parse_end_time(scontrol_line: str) -> float:
    """Epoch seconds of ``EndTime=`` in ``scontrol show job -o`` output (local time, as scontrol
    prints it); inf where the job has no end of its own (``UNLIMITED``, ``Unknown``)."""
    limit = re.search(r"\bTimeLimit=(\S+)", scontrol_line)
    found = re.search(r"\bEndTime=(\S+)", scontrol_line)
    if not found or (limit and limit.group(1) in ("UNLIMITED", "Partition_Limit")):
        return math.inf
    try:
        return datetime.strptime(found.group(1), "%Y-%m-%dT%H:%M:%S").timestamp()
    except ValueError:  # "Unknown", "None"
        return math.inf


def write_end_time(path: Path, end: float, asked: float) -> None:
    """``end`` (None: no limit) and when SLURM was asked, for whoever reads the file by hand."""
    write_json(path, {"end": None if math.isinf(end) else end, "asked": asked})


def read_time_left(path: Path, now: float | None = None) -> float | None:
    """Seconds until the end in ``path`` (>= 0), inf without a limit; None when not known."""
    data = read_json(path)
    if not isinstance(data, dict) or "end" not in data:
        return None
    if data["end"] is None:
        return math.inf
    return max(0.0, float(data["end"]) - (time.time() if now is None else now))
