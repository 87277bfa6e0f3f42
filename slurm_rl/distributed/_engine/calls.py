"""The calls a group dispatched to each worker and not yet seen finish: the bottom of the
engine (group state holds one; status and stuck detection read it). Nothing here runs on the
hot path but ``CallTracker.started``: one append per dispatched call."""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

TRACKED_CALLS_PER_WORKER = 64  # finished calls are pruned when a worker's queue grows past this


@dataclass
class Call:
    ref: Any
    method: str
    dispatched: float


@dataclass
class WorkerRecord:
    restarts: int = 0
    restarting: bool = False
    node_ip: str | None = None
    node_id: str | None = None
    pid: int | None = None
    calls: deque = field(default_factory=deque)  # Call, oldest first
    finished_at: float | None = None  # when the last call seen finished was seen finished


class CallTracker:
    """Per worker, the calls dispatched and not yet seen finish. A call's running time counts
    from its dispatch, or from when the call before it finished (a worker runs its calls one at
    a time), whichever is later. A finish is known to have happened after the call's dispatch and
    after the previous look that saw it still running: the later of the two is used (so a
    running time errs long by at most the time between two looks)."""

    def __init__(self, n: int) -> None:
        self.records = [WorkerRecord() for _ in range(n)]
        self.last_look = 0.0

    def started(self, worker: int, method: str, ref: Any) -> None:
        calls = self.records[worker].calls
        calls.append(Call(ref, method, time.monotonic()))
        if len(calls) > TRACKED_CALLS_PER_WORKER:
            self.prune([worker])

    def prune(self, workers: list[int] | None = None) -> None:
        import ray

        workers = list(range(len(self.records))) if workers is None else workers
        refs = [c.ref for w in workers for c in self.records[w].calls]
        if not refs:
            return
        ready, _ = ray.wait(refs, num_returns=len(refs), timeout=0, fetch_local=False)
        done = set(ready)
        previous_look, self.last_look = self.last_look, time.monotonic()
        for w in workers:
            record = self.records[w]
            while record.calls and record.calls[0].ref in done:
                finished = record.calls.popleft()
                record.finished_at = max(finished.dispatched, previous_look)
            # a later call can finish only after the earlier ones (one call at a time)
            record.calls = deque(c for c in record.calls if c.ref not in done)

    def current(self, worker: int) -> tuple[str, float] | None:
        """(method, seconds it has run) of the worker's current call, or None when idle."""
        record = self.records[worker]
        if not record.calls:
            return None
        call = record.calls[0]
        began = max(call.dispatched, record.finished_at or 0.0)
        return call.method, time.monotonic() - began

    def reset(self, worker: int) -> None:
        self.records[worker].calls.clear()
        self.records[worker].finished_at = None
