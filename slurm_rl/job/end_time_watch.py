"""Node 0 keeps the job's end time fresh in the job dir (core/end_time.py): asked of SLURM at
the start and then every ``REFRESH_S`` from the bootstrap's loop, never from the driver."""

from __future__ import annotations

import time

from ..core.end_time import REFRESH_S, parse_end_time, write_end_time
from ..core.paths import JobPaths
from ..slurm.from_node import job_record_line


class EndTimeWatch:
    def __init__(self, job_id: str, paths: JobPaths, refresh_s: float = REFRESH_S) -> None:
        self.job_id, self.paths, self.refresh_s = job_id, paths, refresh_s
        self._next = 0.0

    def poll(self) -> None:
        now = time.monotonic()
        if now < self._next:
            return
        self._next = now + self.refresh_s
        line = job_record_line(self.job_id)  # None: the next poll asks again, the last answer stays
        if line is not None and "EndTime=" in line:
            write_end_time(self.paths.end_time, parse_end_time(line), time.time())
