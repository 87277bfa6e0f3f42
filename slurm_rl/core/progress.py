"""A job's progress: what last showed the run is moving, and when. Three sources, each in its
own file under ``<job dir>/progress/`` so that none overwrites another's news: a metrics step
(``MetricsLog.log``) or a ``slurm_rl.heartbeat()`` from the driver (``driver.json``), and new
output of the driver itself, not the worker lines Ray forwards into it (``output.json``,
written by node 0's bootstrap, which watches the driver's log). ``status`` and ``list`` show the
newest; a stall is the absence of any (after the first: a long model load is no stall)."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from pathlib import Path

from .events import read_json, write_json

SOURCES = ("driver", "output")
# what Ray prefixes to the lines it forwards from workers and actors ("(Worker pid=12, ip=...) ",
# "(raylet, ip=...) ", "(autoscaler +3s) "), and slurm-rl's own warnings in the driver's log
FORWARDED = re.compile(r"^(\x1b\[[0-9;]*m)*\((\S+ )?(pid=\d+|raylet|autoscaler|gcs_server)[^)]*\)|^slurm-rl: ")


@dataclass(frozen=True)
class Progress:
    t: float  # epoch seconds
    what: str  # "step 1234", "heartbeat", "heartbeat: loading shards", "driver output"

    def age(self, now: float | None = None) -> float:
        return max(0.0, (time.time() if now is None else now) - self.t)


def progress_dir(job_dir: Path) -> Path:
    return job_dir / "progress"


def record(job_dir: Path, source: str, what: str, t: float | None = None) -> None:
    """Note progress from ``source`` ("driver" or "output") now (or at ``t``)."""
    path = progress_dir(job_dir) / f"{source}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json(path, {"t": round(time.time() if t is None else t, 3), "what": what})


def last(job_dir: Path) -> Progress | None:
    """The newest progress of any source, or None before the first."""
    found = []
    for source in SOURCES:
        data = read_json(progress_dir(job_dir) / f"{source}.json")
        if isinstance(data, dict) and isinstance(data.get("t"), (int, float)):
            found.append(Progress(float(data["t"]), str(data.get("what", source))))
    return max(found, key=lambda p: p.t) if found else None


def own_output(lines: list[str]) -> bool:
    """Whether any of these driver-log lines is the driver's own (not forwarded, not blank)."""
    return any(line.strip() and not FORWARDED.match(line) for line in lines)


def stall_text(idle_s: float, last: Progress, stacks: Path | None) -> str:
    """ "stalled for 31 min (last progress: step 1234 at 14:02:07), stacks: PATH" """
    at = time.strftime("%H:%M:%S", time.localtime(last.t))
    where = f", stacks: {stacks}" if stacks else ""
    return f"stalled for {human(idle_s)} (last progress: {last.what} at {at}){where}"


def human(seconds: float) -> str:
    s = int(seconds)
    if s < 120:
        return f"{s} s"
    if s < 7200:
        return f"{s // 60} min"
    return f"{s // 3600} h {s % 3600 // 60} min"


def open_stall(events: list[dict]) -> dict | None:
    """The job's ``stalled`` event while no ``stall_ended`` or new attempt came after it."""
    found = None
    for ev in events:
        name = ev.get("event")
        if name == "stalled":
            found = ev
        elif name == "stall_ended" or (name == "node_start" and found and ev.get("attempt") != found.get("attempt")):
            found = None
    return found


def stall_line(stall: dict, now: float | None = None) -> str:
    """What `status`, `--wait` and `logs -f` say of an open stall (its age counts on)."""
    last_t = float(stall.get("last_t") or 0)
    idle = (time.time() if now is None else now) - last_t
    stacks = Path(stall["stacks"]) if stall.get("stacks") else None
    return stall_text(idle, Progress(last_t, str(stall.get("last", "?"))), stacks)
