"""Node 0 notices a stall: no progress (core/progress.py) for ``--stall-timeout`` after the
first. At that moment it takes the job's stacks (core/stacks.py), names the stall in an event
(``stalled``: what `status`, `--wait` and `logs -f` print) and, after the stacks are in, acts:
``warn`` keeps the job running (progress resuming is ``stall_ended``), ``fail`` and
``requeue`` end it (the lifecycle stops the driver; templates/finalize.sh.j2 requeues only under
``requeue``, within --requeue's budget)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from ..core import progress
from ..core.events import read_events, write_atomic
from ..core.job_dir import lost_nodes
from ..core.progress import stall_text
from ..core.stacks import read_answers, report_path, request
from ..core.stacks_report import render

CHECK_S = 1.0
STACKS_WAIT_S = 10.0  # the longest the stall's action waits for every node's stacks


class StallWatch:
    """Polled from node 0's lifecycle loop; ``poll`` returns the stop reason once a ``fail`` or
    ``requeue`` stall must end the job (after its stacks are taken)."""

    def __init__(
        self,
        job_dir: Path,
        job_id: str,
        timeout_s: float,
        action: str,
        event: Callable[..., None],
        say: Callable[[str], None],
    ) -> None:
        self.job_dir, self.job_id = job_dir, job_id
        self.timeout_s, self.action = timeout_s, action
        self.event, self.say = event, say
        self.stalled: progress.Progress | None = None  # the last progress before the stall
        self.rid: str | None = None
        self.asked_at = 0.0
        self.reason = ""
        self.reported = False
        self._next = 0.0
        self.started = time.time()  # a requeued attempt's clock starts at its own first progress

    def poll(self, now: float | None = None) -> str | None:
        mono = time.monotonic()
        if mono < self._next:
            return None
        self._next = mono + CHECK_S
        now = time.time() if now is None else now
        last = progress.last(self.job_dir)
        if last is None or last.t < self.started:
            return None  # the clock starts at the first progress: a long load is no stall
        if self.stalled is None and now - last.t >= self.timeout_s:
            self.stalled, self.rid, self.asked_at, self.reported = last, request(self.job_dir, "stall"), mono, False
            self.reason = stall_text(now - last.t, last, report_path(self.job_dir, self.rid))
            self.say(f"{self.reason}; action: {self.action}")
            self.event(
                "stalled",
                seconds=round(now - last.t, 1),
                last=last.what,
                last_t=last.t,
                stacks=str(report_path(self.job_dir, self.rid)),
                action=self.action,
            )
        elif self.stalled is not None and last.t > self.stalled.t and self.action == "warn":
            self.event("stall_ended", seconds=round(last.t - self.stalled.t, 1), progress=last.what)
            self.say(f"progress again ({last.what}): the stall ended")
            self.stalled = None
        if self.rid is not None and not self.reported:
            self.reported = self._report(mono)
            if self.reported and self.action in ("fail", "requeue"):
                return self.reason
        return None

    def flush(self) -> None:
        """The job ends: a stall's report still waiting for a node's answer is written now, with
        what came (its ``stalled`` event names the file: it must exist)."""
        if self.rid is not None and not self.reported:
            self.reported = self._report(time.monotonic() + STACKS_WAIT_S)

    def _report(self, mono: float) -> bool:
        """Writes the stacks' report once every node answered or the wait is over."""
        assert self.rid is not None
        answers = read_answers(self.job_dir, self.rid)
        # the nodes running now, as `slurm-rl stacks` waits for them
        missing = [n for n in lost_nodes(read_events(self.job_dir / "events.jsonl")) if n not in answers]
        if missing and mono - self.asked_at < STACKS_WAIT_S:
            return False
        path = report_path(self.job_dir, self.rid)
        write_atomic(path, render(self.job_id, answers, missing, path))
        return True
