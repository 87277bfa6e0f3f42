"""Two streams of lab tests on one lab, and the lock that keeps a test alone when it must be.

The README's command runs the lab tests in one stream (pytest-xdist group ``lab``, beside the
unit tests' ``local``) but for the shared tests marked ``lab_waits`` and those of TAIL_MODULES
(the tail, ``lab-tail``, one group per module): each worker takes those module by module once
its own stream is near its end, and they run beside the lab stream's shared tests in the run's
tail (``stream`` below). With
``SLURM_RL_LAB_STREAMS=2`` and ``-n 3`` the shared tests of SECOND_STREAM_MODULES run in
``lab-tail`` too, from the start: jobs of two tests side by side on the nodes, as on a shared
cluster. That mode found two product bugs (two heads starting together on one node took one GCS
port; teardown of an ended job asked a full node for a step), but on two cores it gained no time
(the tests then compete for the CPUs with the local stream: 1812 s against 1780 s for the one
stream), so CI does not use it.

A test marked ``lab_shared`` submits its own jobs and looks only at them (their processes,
files, states and logs): it runs under a shared lock, so one such test of each stream may run at
once, their jobs side by side on the lab's nodes as users' jobs are. Every other lab test
restarts or reconfigures the lab, fails a node, kills daemons by name, counts the whole queue,
times itself, or needs the nodes' free CPUs or GPUs: it takes the lock exclusively, waits for
the test beside it to end, and nothing starts beside it. Consecutive exclusive tests of a stream
keep the lock between them, so a lab switched for a module (cgroups, 4 nodes) is never seen by
the other stream.

A shared test's jobs do not ask for ``--oversubscribe`` (``run_cli`` fails one that does): SLURM
puts such a job only on nodes where every job allows sharing, and the other stream's jobs do not,
so a 3-node one stayed pending (Reason=Resources) with free CPUs on all three nodes for as long
as one of them ran (measured on the lab, 26.05, cons_tres, OverSubscribe=YES:4); a job that does
not oversubscribe starts beside either kind.

A waiting exclusive test goes first: it holds a turnstile that a shared test passes through
before it takes its own lock (flock(2) alone lets one stream's run of shared tests starve the
other's exclusive one). The lock is outside the test's timeout (the hook wraps pytest-timeout's)
and outside ``--durations``: a test's time is its own work. Its wait is bounded (LOCK_WAIT_S,
longer than the longest run of exclusive tests a stream holds it for): past it the test fails
naming the holder (its test, worker and how long), which each holder writes beside the lock."""

from __future__ import annotations

import fcntl
import os
import tempfile
import time
from pathlib import Path
from typing import IO

import pytest

SHARED_MARK = "lab_shared"
WAITS_MARK = "lab_waits"
STREAMS_ENV = "SLURM_RL_LAB_STREAMS"
SECOND_STREAM = "lab-tail"
# Shared tests of these modules run in the second stream; the rest of the lab tests in the first
# (with every exclusive one and every container test, so that the Pyxis image is made and the lab
# switched by one process). Chosen so the two streams' shared work is about even (the durations
# `pytest --durations=0 tests/lab` prints): add a new module to whichever has less.
SECOND_STREAM_MODULES = frozenset(
    {
        "test_commands.py",
        "test_distributed_lab.py",
        "test_head_shapes.py",
        "test_laptop_lab.py",
        "test_nemo_compat_lab.py",
        "test_python_api.py",
        "test_rollouts_lab.py",
        "test_scale_and_shapes.py",
        "test_worker_reliability_lab.py",
        "test_workflows_lab.py",
    }
)


# Shared tests of these modules run in lab-tail in every mode, beside the lab_waits ones: CI's tail
# (after the local stream) then holds two streams' worth of shared work, split about evenly
# (ci88: the lab stream's shared tests 730 s, lab-tail's 532 s; laptop and rollouts, 88 s, moved
# here. ci90: the lab stream's worker busy 1482 s, the other's 1347 s; commands, 62 s, moved
# here). None of them uses containers or GPUs, so the lab stream alone makes the Pyxis image and
# no test of the tail waits for the lab stream's GPU jobs.
TAIL_MODULES = frozenset(
    {
        "test_commands.py",
        "test_distributed_lab.py",
        "test_laptop_lab.py",
        "test_nemo_compat_lab.py",
        "test_rollouts_lab.py",
        "test_scale_and_shapes.py",
        "test_worker_reliability_lab.py",
    }
)


def is_shared(item: pytest.Item) -> bool:
    return item.get_closest_marker(SHARED_MARK) is not None


def stream(item: pytest.Item) -> str:
    """The xdist group of a lab test: ``lab``, but a tail group for a shared test marked lab_waits
    (its time is SLURM's clocks) or of TAIL_MODULES, and with SLURM_RL_LAB_STREAMS=2 for the
    shared tests of SECOND_STREAM_MODULES (there one group, ``lab-tail``, the second stream from the
    start).

    Under ``-n 2`` the tail is one group per module (``lab-tail.test_faults``), queued after ``local``
    and ``lab``: pytest-xdist hands the next one to whichever worker is near the end of what it
    holds, so both workers take modules until the tail is done, and they end within about one
    module of each other. (As one group, the whole tail went to the worker that asked first: when
    the local stream ran slow beside the lab's heavy tests, that was the lab stream's worker, which
    ran all of it alone, after its own tests, while the other sat idle: ci92, ~570 s.) Its tests
    run beside the lab stream's shared ones (ordered after all its exclusive ones, 4 nodes
    included: tests/conftest.py lab_order)."""
    if not is_shared(item):
        return "lab"
    two_streams = os.environ.get(STREAMS_ENV) == "2"
    if item.get_closest_marker(WAITS_MARK) is not None or item.path.name in TAIL_MODULES:
        return SECOND_STREAM if two_streams else f"{SECOND_STREAM}.{item.path.stem}"
    if two_streams and item.path.name in SECOND_STREAM_MODULES:
        return SECOND_STREAM
    return "lab"


def in_tail(group: str) -> bool:
    """Whether an xdist group (``stream``'s answer) is the second stream or one of the tail's."""
    return group == SECOND_STREAM or group.startswith(f"{SECOND_STREAM}.")


LOCK_WAIT_S = 2400.0  # a stream's longest exclusive run was ~800 s (ci88); CI's whole pytest ~1500 s
LOCK_POLL_S = 0.2


class LabLock:
    """This process's hold on the lab: None, "shared" or "exclusive"; every wait bounded."""

    def __init__(self, folder: Path, wait_s: float = LOCK_WAIT_S) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.folder, self.wait_s = folder, wait_s
        self._turnstile: IO[str] = open(folder / "turnstile", "a")  # noqa: SIM115 (held for the session)
        self._lab: IO[str] = open(folder / "lab", "a")  # noqa: SIM115
        self.held: str | None = None
        self.me = f"{os.environ.get('PYTEST_XDIST_WORKER', 'pytest')} (pid {os.getpid()})"

    def take(self, exclusive: bool, test: str = "") -> None:
        if self.held == "exclusive" or (self.held == "shared" and not exclusive):
            return
        if self.held == "shared":  # never held across tests, but a shared hold is not upgraded
            self.release()
        deadline = time.monotonic() + self.wait_s
        self._flock(self._turnstile, fcntl.LOCK_EX, deadline, test)
        if exclusive:
            try:
                self._flock(self._lab, fcntl.LOCK_EX, deadline, test)  # the turnstile stays held
            except BaseException:
                fcntl.flock(self._turnstile, fcntl.LOCK_UN)
                raise
            self.held = "exclusive"
        else:
            try:
                self._flock(self._lab, fcntl.LOCK_SH, deadline, test)
            finally:
                fcntl.flock(self._turnstile, fcntl.LOCK_UN)
            self.held = "shared"
        self._note_holder(test)

    def _flock(self, f: IO[str], how: int, deadline: float, test: str) -> None:
        while True:
            try:
                fcntl.flock(f, how | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise TimeoutError(
                        f"{test or 'a lab test'} waited {self.wait_s:.0f} s for the lab lock ({self.folder}):"
                        f" held by {self.holders()}"
                    ) from None
                time.sleep(LOCK_POLL_S)

    def _note_holder(self, test: str) -> None:
        (self.folder / f"holder-{os.getpid()}").write_text(f"{self.held} {time.time():.0f} {self.me} {test}\n")

    def holders(self) -> str:
        """Who holds the lock now, as each holder wrote it: its kind, test, worker and for how long."""
        out = []
        for path in sorted(self.folder.glob("holder-*")):
            try:
                kind, since, rest = path.read_text().strip().split(" ", 2)
            except (OSError, ValueError):
                continue
            out.append(f"{rest} ({kind}, for {time.time() - float(since):.0f} s)")
        return "; ".join(out) or "nobody that said so"

    def release(self) -> None:
        if self.held is None:
            return
        (self.folder / f"holder-{os.getpid()}").unlink(missing_ok=True)
        fcntl.flock(self._lab, fcntl.LOCK_UN)
        if self.held == "exclusive":
            fcntl.flock(self._turnstile, fcntl.LOCK_UN)
        self.held = None


_running_shared = False  # the test this process runs now is marked lab_shared


def note_running(item: pytest.Item | None) -> None:
    global _running_shared
    _running_shared = item is not None and is_shared(item)


def refuse_oversubscribe(args: tuple[str, ...]) -> None:
    """A shared test's `slurm-rl` command may not ask for --oversubscribe (the module's docstring)."""
    if _running_shared and "--oversubscribe" in args:
        pytest.fail(
            "a lab_shared test's job asks for --oversubscribe: SLURM starts it only on nodes whose jobs all"
            " allow sharing, so jobs of the test beside it hold it pending; fit the jobs in the lab's CPUs"
            " (--cpus-per-node) or run the test alone",
            pytrace=False,
        )


_lock: LabLock | None = None


def lab_lock() -> LabLock:
    """One per test process, on files every worker of this pytest run shares."""
    global _lock
    if _lock is None:
        run = os.environ.get("PYTEST_XDIST_TESTRUNUID") or f"pid{os.getpid()}"
        _lock = LabLock(Path(tempfile.gettempdir()) / f"slurm-rl-lab-tests-{run}")
    return _lock
