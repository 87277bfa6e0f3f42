"""Progress while waiting, tables and log following, for the CLI (rich, on stderr)."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from rich.console import Console
from rich.table import Table

from .jobs import JobSummary, find_job_dir, summarize
from .paths import current_user
from .slurm import SlurmClient
from .spec import ClusterSpec


def wait_for_job(spec: ClusterSpec, job_id: int, client: SlurmClient, quiet: bool = False,
                 poll_s: float = 0.5) -> JobSummary:
    """Follow a job until SLURM says it ended; show state, phase and nodes up meanwhile."""
    console = Console(stderr=True)
    paths = find_job_dir(spec, current_user(), job_id)
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
        table.add_row(str(r.job_id), r.paths.job_dir.parent.name, r.state, r.phase,
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
