"""Node 0 notes the driver's own output as progress (core/progress.py): every ``POLL_S`` it
reads what the driver's log gained, and a line that is the driver's (not one Ray forwarded
from a worker, not slurm-rl's own warning) counts. From the log's size when the attempt
started: a requeued job's earlier output is not this attempt's progress."""

from __future__ import annotations

import time
from pathlib import Path

from ..core import progress

POLL_S = 2.0
MAX_READ = 1 << 20  # a driver that printed megabytes since the last poll: its tail decides


class OutputWatch:
    def __init__(self, driver_log: Path, job_dir: Path) -> None:
        self.log, self.job_dir = driver_log, job_dir
        self._offset = driver_log.stat().st_size if driver_log.exists() else 0
        self._partial = b""
        self._next = 0.0
        self._last_read = time.time()  # the line came after this: the time it is noted with

    def poll(self) -> None:
        now = time.monotonic()
        if now < self._next:
            return
        self._next = now + POLL_S
        since, self._last_read = self._last_read, time.time()  # what is new was written in between
        try:
            size = self.log.stat().st_size
            if size <= self._offset:
                return
            with open(self.log, "rb") as f:
                f.seek(max(self._offset, size - MAX_READ))
                data = self._partial + f.read(size - self._offset)
        except OSError:
            return
        self._offset = size
        *lines, self._partial = data.split(b"\n")
        if progress.own_output([line.decode(errors="replace") for line in lines]):
            # written after the previous read, when exactly is not known: the earliest it can
            # have been, so a metrics step the driver logged after it stays the newest news
            progress.record(self.job_dir, "output", "driver output", t=since)
