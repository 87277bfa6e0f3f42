"""Looking at jobs after submission: find a job dir by id, summarize its phase and exit, follow
it while it runs (rich progress on stderr), print tables, follow a log."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from ..core.errors import JobError, UnknownJobError
from ..core.events import read_events
from ..core.exits import read_exit
from ..core.manifest import load_manifest
from ..core.paths import JobPaths
from ..core.slurm import JobState, SlurmClient
from ..core.spec import ClusterSpec
from . import index

PHASES = [
    "submitted",
    "node_start",
    "node_up",
    "ready",
    "driver_start",
    "driver_connected",
    "driver_end",
    "node_cleaned",
    "job_end",
]


def find_job_dir(
    job_id: int, user: str, client: SlurmClient | None = None, spec: ClusterSpec | None = None
) -> JobPaths:
    """A job's dir from its id alone: the per-user index, else SLURM's record of the job's
    output path (<job dir>/logs/batch.log), else the spec's fileroot. No --spec needed."""
    found = index.lookup(job_id)
    if found is None and client is not None:
        out = client.job_output_path(job_id)
        candidate = JobPaths(Path(out).parent.parent) if out else None
        if candidate is not None and candidate.manifest.exists() and candidate.job_id == str(job_id):
            found = candidate
    if found is None and spec is not None:
        matches = sorted((Path(spec.fileroot) / user).glob(f"*/{job_id}"))
        found = JobPaths(matches[0]) if matches else None
    if found is None:
        raise UnknownJobError(
            f"job {job_id}: no slurm-rl job dir found (not in {index.index_path()}, not known to "
            f"SLURM with a slurm-rl log path{'' if spec is None else f', not under {spec.fileroot}/{user}'}); "
            f"is it your job? (`slurm-rl list` shows yours)"
        )
    return found


def all_job_dirs(user: str, spec: ClusterSpec | None = None) -> list[JobPaths]:
    """Your jobs of every spec (the index), plus any under ``spec``'s fileroot; newest first."""
    dirs = {e["job_dir"]: JobPaths(Path(str(e["job_dir"]))) for e in index.entries()}
    if spec is not None:
        for p in (Path(spec.fileroot) / user).glob("*/*"):
            if p.is_dir() and p.name.isdigit() and JobPaths(p).manifest.exists():
                dirs.setdefault(str(p), JobPaths(p))
    return sorted(dirs.values(), key=lambda p: int(p.job_id), reverse=True)


@dataclass(frozen=True)
class JobSummary:
    job_id: int
    paths: JobPaths
    state: str
    phase: str
    nodes_up: int
    nodes: int
    exit_code: int | None
    exit_reason: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "job_id": self.job_id,
            "job_dir": str(self.paths.job_dir),
            "state": self.state,
            "phase": self.phase,
            "nodes_up": self.nodes_up,
            "nodes": self.nodes,
            "exit_code": self.exit_code,
            "exit_reason": self.exit_reason,
        }


def _requested_nodes(paths: JobPaths) -> int:
    try:
        return load_manifest(paths.manifest).total_nodes
    except JobError:
        return 0


def summarize(paths: JobPaths, state: JobState | None) -> JobSummary:
    events = read_events(paths.events)
    phase = "submitted"
    for ev in events:
        if ev.get("event") in PHASES and PHASES.index(ev["event"]) > PHASES.index(phase):
            phase = ev["event"]
        if ev.get("event") == "node_failed":
            phase = "failed"
            break
    up = len({ev.get("node") for ev in events if ev.get("event") == "node_up"})
    exit_code, exit_reason = read_exit(paths)
    slurm_state = state.state if state else "UNKNOWN"
    if slurm_state == "UNKNOWN" and exit_code is not None:
        slurm_state = "COMPLETED" if exit_code == 0 else "FAILED"
    return JobSummary(int(paths.job_id), paths, slurm_state, phase, up, _requested_nodes(paths), exit_code, exit_reason)


def job_summary(job_id: int, user: str, client: SlurmClient, spec: ClusterSpec | None = None) -> JobSummary:
    return summarize(find_job_dir(job_id, user, client, spec), client.job_state(job_id))


# ---- following a job ----------------------------------------------------------------------------
SLURM_POLL_MIN_S = 2.0  # the first SLURM query comes this long after the start ...
SLURM_POLL_MAX_S = 15.0  # ... and the interval doubles up to this (sites police tools that poll hard)


class GentleState:
    """A job's SLURM state for followers (``--wait``, ``logs -f``): SLURM is asked at most every
    2 s at first, backing off to every 15 s, and once more when the job dir says the job ended
    (finalize's ``job_end``; a job that dies before slurm-rl starts is seen by SLURM alone)."""

    def __init__(self, paths: JobPaths, job_id: int, client: SlurmClient) -> None:
        self.paths, self.job_id, self.client = paths, job_id, client
        self.state = client.job_state(job_id)
        self.ended_here = False
        self._interval = SLURM_POLL_MIN_S
        self._next_ask = time.monotonic() + SLURM_POLL_MIN_S

    def poll(self) -> bool:
        """Refresh (a job-dir read; SLURM only when due); True once the job has ended."""
        self.ended_here = any(e.get("event") == "job_end" for e in read_events(self.paths.events))
        if self.ended_here or time.monotonic() >= self._next_ask:
            self.state = self.client.job_state(self.job_id)
            self._interval = min(self._interval * 2, SLURM_POLL_MAX_S)
            self._next_ask = time.monotonic() + self._interval
        return self.state.finished or self.state.state == "UNKNOWN" or self.ended_here


def wait_for_job(
    paths: JobPaths, job_id: int, client: SlurmClient, quiet: bool = False, poll_s: float = 0.5
) -> JobSummary:
    """Follow a job until it ended; show state, phase and nodes up meanwhile.

    Progress comes from the job dir (events.jsonl, a file read every ``poll_s``); SLURM is
    asked as GentleState says."""
    console = Console(stderr=True)
    last = None
    gentle = GentleState(paths, job_id, client)
    with console.status(f"job {job_id}: submitted", spinner="dots") as st:
        while True:
            ended = gentle.poll()
            summary = summarize(paths, gentle.state)
            text = f"job {job_id}: {summary.state}, {summary.phase}, {summary.nodes_up}/{summary.nodes} nodes up"
            if text != last and not quiet:
                st.update(text)
                last = text
            if ended:
                break
            time.sleep(poll_s)
    state = gentle.state
    # The batch step may end a moment before the exit code file is visible on a shared FS.
    deadline = time.monotonic() + 5
    while summary.exit_code is None and time.monotonic() < deadline:
        time.sleep(0.1)
        summary = summarize(paths, state)
    if not state.finished and summary.exit_code is not None:  # SLURM has not caught up yet
        summary = replace(summary, state="COMPLETED" if summary.exit_code == 0 else "FAILED")
    if not quiet:
        reason = summary.exit_reason or _batch_log_reason(paths.batch_log)
        console.print(f"job {job_id}: {summary.state}, exit code {summary.exit_code}: {reason}")
        console.print(f"  driver log: {paths.driver_log}")
    return summary


def _batch_log_reason(batch_log: Path) -> str:
    """For a job that died before slurm-rl could say why: the last lines SLURM wrote."""
    try:
        tail = [line for line in batch_log.read_text(errors="replace").splitlines() if line.strip()][-3:]
    except FileNotFoundError:
        return f"the job ended before writing {batch_log}"
    return f"the job ended before slurm-rl started on every node; {batch_log} ends with: " + " | ".join(tail)


def print_table(rows: Iterable[JobSummary]) -> None:
    """One row per job; state and phase never truncated (80 columns fit); the job dir is in
    `slurm-rl list` and `status --json`."""
    table = Table(box=None, pad_edge=False)
    for name, kw in (
        ("job", {}),
        ("name", {"overflow": "ellipsis", "max_width": 24}),
        ("state", {"no_wrap": True}),
        ("phase", {"no_wrap": True}),
        ("nodes", {"no_wrap": True}),
        ("exit", {"no_wrap": True}),
    ):
        table.add_column(name, **kw)
    for r in rows:
        table.add_row(
            str(r.job_id),
            r.paths.name_dir.name,
            r.state,
            r.phase,
            f"{r.nodes_up}/{r.nodes}",
            "" if r.exit_code is None else str(r.exit_code),
        )
    Console().print(table)


def follow_file(path: Path, done: Callable[[], bool], poll_s: float = 0.5) -> None:
    """Print a file as it grows until ``done()``; then print what is left."""
    pos = 0
    while True:
        finished = done()
        if path.exists():
            with open(path, "rb") as f:
                f.seek(pos)
                chunk = f.read()
                pos += len(chunk)
            if chunk:
                sys.stdout.write(chunk.decode(errors="replace"))
                sys.stdout.flush()
        if finished:
            return
        time.sleep(poll_s)
