"""Looking at jobs after submission: find a job dir by id, summarize its phase and exit, follow
it while it runs (rich progress on stderr), print tables, follow a log."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
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

PHASES = ["submitted", "node_start", "node_up", "ready", "driver_start", "driver_connected", "driver_end",
          "node_cleaned", "job_end"]


def find_job_dir(spec: ClusterSpec, user: str, job_id: int) -> JobPaths:
    matches = sorted((Path(spec.fileroot) / user).glob(f"*/{job_id}"))
    if not matches:
        raise UnknownJobError(f"job {job_id}: no job dir under {Path(spec.fileroot) / user}; is it your job, "
                              f"submitted with this spec? (`slurm-rl list` shows yours)")
    return JobPaths(matches[0])


def all_job_dirs(spec: ClusterSpec, user: str) -> list[JobPaths]:
    root = Path(spec.fileroot) / user
    dirs = [p for p in root.glob("*/*") if p.is_dir() and p.name.isdigit()]
    return [JobPaths(p) for p in sorted(dirs, key=lambda p: int(p.name))]


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
        return {"job_id": self.job_id, "job_dir": str(self.paths.job_dir), "state": self.state,
                "phase": self.phase, "nodes_up": self.nodes_up, "nodes": self.nodes,
                "exit_code": self.exit_code, "exit_reason": self.exit_reason}


def _requested_nodes(paths: JobPaths) -> int:
    try:
        return load_manifest(paths.manifest).nodes
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
    return JobSummary(int(paths.job_id), paths, slurm_state, phase, up, _requested_nodes(paths),
                      exit_code, exit_reason)


def job_summary(spec: ClusterSpec, user: str, job_id: int, client: SlurmClient) -> JobSummary:
    return summarize(find_job_dir(spec, user, job_id), client.job_state(job_id))


# ---- following a job ----------------------------------------------------------------------------
def wait_for_job(paths: JobPaths, job_id: int, client: SlurmClient, quiet: bool = False,
                 poll_s: float = 0.5) -> JobSummary:
    """Follow a job until SLURM says it ended; show state, phase and nodes up meanwhile."""
    console = Console(stderr=True)
    last = None
    with console.status(f"job {job_id}: submitted", spinner="dots") as st:
        while True:
            state = client.job_state(job_id)
            summary = summarize(paths, state)
            text = f"job {job_id}: {summary.state}, {summary.phase}, {summary.nodes_up}/{summary.nodes} nodes up"
            if text != last and not quiet:
                st.update(text)
                last = text
            if state.finished or state.state == "UNKNOWN":
                break
            time.sleep(poll_s)
    # The batch step may end a moment before the exit code file is visible on a shared FS.
    deadline = time.monotonic() + 5
    while summary.exit_code is None and time.monotonic() < deadline:
        time.sleep(0.1)
        summary = summarize(paths, client.job_state(job_id))
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
    table = Table("job", "name", "state", "phase", "nodes up", "exit", "job dir")
    for r in rows:
        table.add_row(str(r.job_id), r.paths.name_dir.name, r.state, r.phase,
                      f"{r.nodes_up}/{r.nodes}", "" if r.exit_code is None else str(r.exit_code),
                      str(r.paths.job_dir))
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
