"""Two streams of lab tests on one lab, and the lock that keeps a test alone when it must be.

The README's command (``-n 3 --dist loadgroup``) runs the lab tests in two pytest-xdist groups,
beside the unit tests' ``local``: ``lab-b``, the tests marked ``lab_waits`` (their wall time is
mostly SLURM's own clocks: a time limit SLURM checks every 30 s, its requeue delay, a stall
timeout; they start few processes), and ``lab``, every other lab test. On 2 cores two streams of
ordinary lab tests gained nothing (they competed for the CPUs: 1812 s against 1780 s for one
stream, when the shared tests were split by module); a test that mostly waits leaves the CPUs to
the stream beside it. Within ``lab`` the exclusive tests run first (tests/conftest.py orders
them), so ``lab-b`` waits once, at the start, and then runs beside ``lab``'s shared tests; the
4-node and ``lab_last`` tests come after those. Running lab tests side by side also found two
product bugs (two heads starting together on one node took one GCS port; teardown of an ended
job asked a full node for a step).

A test marked ``lab_shared`` submits its own jobs and looks only at them (their processes,
files, states and logs): it runs under a shared lock, so one such test of each stream may run at
once, their jobs side by side on the lab's nodes as users' jobs are. Every other lab test
restarts or reconfigures the lab, fails a node, kills daemons by name, counts the whole queue,
times itself, or needs the nodes' free CPUs or GPUs: it takes the lock exclusively, waits for
the test beside it to end, and nothing starts beside it. Consecutive exclusive tests of a stream
keep the lock between them, so a lab switched for a module (4 nodes) is never seen by the other
stream. A ``lab_waits`` test must also be ``lab_shared`` (else it stays in ``lab``).

A waiting exclusive test goes first: it holds a turnstile that a shared test passes through
before it takes its own lock (flock(2) alone lets one stream's run of shared tests starve the
other's exclusive one). The lock is outside the test's timeout (the hook wraps pytest-timeout's)
and outside ``--durations``: a test's time is its own work."""

from __future__ import annotations

import fcntl
import os
import tempfile
from pathlib import Path
from typing import IO

import pytest

SHARED_MARK = "lab_shared"
WAITS_MARK = "lab_waits"
SECOND_STREAM = "lab-b"


def is_shared(item: pytest.Item) -> bool:
    return item.get_closest_marker(SHARED_MARK) is not None


def stream(item: pytest.Item) -> str:
    """The xdist group of a lab test: ``lab-b`` for a shared test that mostly waits, else ``lab``."""
    if is_shared(item) and item.get_closest_marker(WAITS_MARK) is not None:
        return SECOND_STREAM
    return "lab"


class LabLock:
    """This process's hold on the lab: None, "shared" or "exclusive"."""

    def __init__(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self._turnstile: IO[str] = open(folder / "turnstile", "a")  # noqa: SIM115 (held for the session)
        self._lab: IO[str] = open(folder / "lab", "a")  # noqa: SIM115
        self.held: str | None = None

    def take(self, exclusive: bool) -> None:
        if self.held == "exclusive" or (self.held == "shared" and not exclusive):
            return
        if self.held == "shared":  # never held across tests, but a shared hold is not upgraded
            self.release()
        fcntl.flock(self._turnstile, fcntl.LOCK_EX)
        if exclusive:
            fcntl.flock(self._lab, fcntl.LOCK_EX)  # the turnstile stays held: no new shared test
            self.held = "exclusive"
        else:
            fcntl.flock(self._lab, fcntl.LOCK_SH)
            fcntl.flock(self._turnstile, fcntl.LOCK_UN)
            self.held = "shared"

    def release(self) -> None:
        if self.held is None:
            return
        fcntl.flock(self._lab, fcntl.LOCK_UN)
        if self.held == "exclusive":
            fcntl.flock(self._turnstile, fcntl.LOCK_UN)
        self.held = None


_lock: LabLock | None = None


def lab_lock() -> LabLock:
    """One per test process, on files every worker of this pytest run shares."""
    global _lock
    if _lock is None:
        run = os.environ.get("PYTEST_XDIST_TESTRUNUID") or f"pid{os.getpid()}"
        _lock = LabLock(Path(tempfile.gettempdir()) / f"slurm-rl-lab-tests-{run}")
    return _lock
