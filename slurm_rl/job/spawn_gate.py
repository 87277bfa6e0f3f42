"""One gate between a node's role thread starting processes and the node's cleanup.

The role thread (head.py, worker.py) starts Ray's daemons and the driver while the node's main
loop (node_lifecycle.py) may already have decided to stop: a required service failed, another
node failed, a signal came. Cleanup kills what it finds; a `ray start` still running in the role
thread would start the GCS a moment later, and nothing would be left to stop it (seen in CI: a
service that failed in 1 s, the head's `ray start` mid-way, a `gcs_server` left on the node after
the job). So each process start holds the gate while it spawns (the driver's Popen, a service
instance's, each of Ray's daemons inside `ray start`: ray_start.py), cleanup closes it first,
waiting only for a spawn in flight, and no spawn begins once it is closed: what cleanup then
finds is all there is. A `ray start` in flight is not waited for (under load it takes tens of
seconds, and a time limit's SIGTERM comes KillWait before SIGKILL): its next spawn fails."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

# How long cleanup waits for a spawn in flight (a fork and exec: milliseconds, seconds on a
# machine out of memory). Well inside SLURM's KillWait (30 s by default), which comes after a
# cancel's SIGTERM and before its SIGKILL.
CLOSE_WAIT_S = 10.0


class SpawnGate:
    def __init__(self, closed: type[Exception]) -> None:
        """``closed``: what a start raises once the gate is closed (context.py's Stopped)."""
        self._lock = threading.Lock()
        self._closed = False
        self._error = closed

    @property
    def closed(self) -> bool:
        return self._closed

    @contextlib.contextmanager
    def starting(self, what: str) -> Iterator[None]:
        """Held while WHAT starts processes; Stopped at once when cleanup has begun."""
        with self._lock:
            if self._closed:
                raise self._error(f"not starting {what}: the node is cleaning up")
            yield

    def close(self, wait_s: float = CLOSE_WAIT_S) -> bool:
        """No start after this; False when one in flight did not end within WAIT_S."""
        got = self._lock.acquire(timeout=wait_s)
        self._closed = True
        if got:
            self._lock.release()
        return got
