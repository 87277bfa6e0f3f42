"""Looking at jobs after submission: find a job dir by id, its phase, its exit code."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import UnknownJobError
from .events import read_events, read_json
from .paths import JobPaths
from .slurm import JobState, SlurmClient
from .spec import ClusterSpec

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


def summarize(paths: JobPaths, state: JobState | None) -> JobSummary:
    events = read_events(paths.events)
    opts = read_json(paths.options, {}) or {}
    phase = "submitted"
    for ev in events:
        if ev.get("event") in PHASES and PHASES.index(ev["event"]) > PHASES.index(phase):
            phase = ev["event"]
        if ev.get("event") == "node_failed":
            phase = "failed"
            break
    up = len({ev.get("node") for ev in events if ev.get("event") == "node_up"})
    code_text = _read(paths.exit_code)
    exit_code = int(code_text) if code_text and code_text.lstrip("-").isdigit() else None
    slurm_state = state.state if state else "UNKNOWN"
    if slurm_state == "UNKNOWN" and exit_code is not None:
        slurm_state = "COMPLETED" if exit_code == 0 else "FAILED"
    return JobSummary(int(paths.job_dir.name), paths, slurm_state, phase, up, int(opts.get("nodes", 0)),
                      exit_code, _read(paths.exit_reason))


def _read(path: Path) -> str:
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        return ""


def job_summary(spec: ClusterSpec, user: str, job_id: int, client: SlurmClient) -> JobSummary:
    paths = find_job_dir(spec, user, job_id)
    return summarize(paths, client.job_state(job_id))
