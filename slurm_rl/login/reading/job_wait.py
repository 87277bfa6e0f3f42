"""Following a job until it ends (``submit --wait``, ``logs -f``, a chain's and the Python API's
waits): SLURM asked gently (GentleState), the job's state, phase and nodes up on a spinner, a
pending job's wait in words (what it waits for, SLURM's estimated start, the jobs ahead of it),
each stall said once, the driver's output above, and how the job ended."""

from __future__ import annotations

import time
from typing import Any

from rich.console import Console

from ...core.events import read_events
from ...core.job_ids import JobId
from ...core.paths import JobPaths
from ...core.progress import stall_line
from ...slurm import JobState, SlurmClient
from .follow import LogFollower
from .lookup import job_state_for
from .summary import JobSummary, end_line, summarize
from .waiting import queue_place

SLURM_POLL_MIN_S = 2.0  # the first SLURM query comes this long after the start ...
SLURM_POLL_MAX_S = 15.0  # ... and the interval doubles up to this (sites police tools that poll hard)


AHEAD_POLL_S = 30.0  # a pending job's place in its partition's queue, asked this often
ENDING_POLL_S = 1.0  # SLURM is asked this often once the job dir says the job ended


def settled(state: JobState) -> bool:
    """SLURM's word on the job is final: it left the queue (COMPLETED, FAILED, ...), or SLURM
    forgot it (UNKNOWN: then the job dir's exit files say how it ended)."""
    return state.finished or state.state == "UNKNOWN"


class GentleState:
    """A job's SLURM state for followers (``--wait``, ``logs -f``): SLURM is asked at most every
    2 s at first, backing off to every 15 s; once the job dir says the job ended (finalize's
    ``job_end``) every second, until SLURM's state is final. A follower ends on SLURM's final
    state, never on the job dir alone: between the driver's exit and the epilog's end SLURM
    still says RUNNING or COMPLETING, and a state read then is not the job's."""

    def __init__(self, paths: JobPaths, job_id: JobId, client: SlurmClient) -> None:
        self.paths, self.job_id, self.client = paths, job_id, client
        self.state = job_state_for(paths, client)
        self.ended_here = False
        self._interval = SLURM_POLL_MIN_S
        self._next_ask = time.monotonic() + SLURM_POLL_MIN_S

    def poll(self) -> bool:
        """Refresh (a job-dir read; SLURM only when due); True once SLURM's state is final."""
        if not self.ended_here:
            self.ended_here = any(e.get("event") == "job_end" for e in read_events(self.paths.events))
            if self.ended_here:
                self._next_ask = time.monotonic()  # ask at once
        if time.monotonic() >= self._next_ask:
            self.state = job_state_for(self.paths, self.client)
            self._interval = ENDING_POLL_S if self.ended_here else min(self._interval * 2, SLURM_POLL_MAX_S)
            self._next_ask = time.monotonic() + self._interval
        return settled(self.state)


class StallNotice:
    """Says each stall of a followed job once (`--wait`, `logs -f`): a stall is known by the
    time of its last progress, so a second stall after progress resumed is news again."""

    def __init__(self) -> None:
        self._said: object = None

    def news(self, stall: dict[str, Any] | None) -> str | None:
        if not stall or stall.get("last_t") == self._said:
            return None
        self._said = stall.get("last_t")
        return stall_line(stall)


class QueuePlace:
    """The jobs ahead of a pending job, asked at most every AHEAD_POLL_S (an squeue of its whole
    partition: heavier than the job's own)."""

    def __init__(self, client: SlurmClient) -> None:
        self.client, self._next = client, 0.0
        self._ahead: int | None = None

    def ahead(self, queued: JobState | None) -> int | None:
        if queued is not None and time.monotonic() >= self._next:
            self._ahead, self._next = self.client.jobs_ahead(queued), time.monotonic() + AHEAD_POLL_S
        return self._ahead


def wait_for_job(
    paths: JobPaths, job_id: JobId, client: SlurmClient, quiet: bool = False, poll_s: float = 0.5
) -> JobSummary:
    """Follow a job until SLURM's state is final; show state, phase and nodes up meanwhile.

    Progress comes from the job dir (events.jsonl, a file read every ``poll_s``); SLURM is
    asked as GentleState says."""
    console = Console(stderr=True)
    last = None
    gentle = GentleState(paths, job_id, client)
    driver = LogFollower(paths.driver_log)
    stall = StallNotice()
    place = QueuePlace(client)
    with console.status(f"job {job_id}: submitted", spinner="dots") as st:
        while True:
            ended = gentle.poll()
            summary = summarize(paths, gentle.state)
            text = f"job {job_id}: {summary.state}, {summary.phase}, {summary.nodes_up}/{summary.nodes} nodes up"
            if summary.waits_for:  # pending: why, when SLURM expects it to start, the jobs ahead
                ahead = place.ahead(summary.queued)
                said = queue_place(summary.queued, ahead)
                text = f"job {job_id}: PENDING, waiting for {summary.waits_for}" + (f"; {said}" if said else "")
            if gentle.ended_here and not ended:
                text = f"job {job_id}: exit code {summary.exit_code}; SLURM is completing the job (epilog)"
            news = stall.news(summary.stall)
            if news:  # said even under --json
                console.print(f"slurm-rl: job {job_id}: {news}", markup=False, highlight=False)
            if not quiet:
                for line in driver.new_lines():  # the driver's output, above the spinner
                    console.print(line, markup=False, highlight=False, soft_wrap=True)
                if text != last:
                    st.update(text)
                    last = text
            if ended:
                break
            time.sleep(poll_s)
    # A job SLURM ended may show its exit code file a moment later on a shared FS.
    deadline = time.monotonic() + 5
    while summary.exit_code is None and time.monotonic() < deadline:
        time.sleep(0.1)
        summary = summarize(paths, gentle.state)
    if not quiet:
        for line in driver.new_lines():
            console.print(line, markup=False, highlight=False, soft_wrap=True)
        console.print(end_line(summary), markup=False, highlight=False, soft_wrap=True)
    return summary
