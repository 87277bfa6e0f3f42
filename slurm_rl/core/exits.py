"""A job's exit: the one writer of ``exit_code`` / ``exit_reason`` and the one mapping from a
process's return code to a shell-style exit code.

Both files are written atomically (temp + rename): ``submit --wait``, ``status`` and the
finalize step read them while nodes may still be writing.
"""

from __future__ import annotations

import re
import signal
import time
from dataclasses import dataclass
from typing import Any

from .causes import Cause, parse_cause
from .events import write_atomic
from .paths import JobPaths

STOPPED_RC = 128 + signal.SIGTERM  # 143: the job was stopped from outside (scancel, time limit)


REQUEUE_RC = 75  # EX_TEMPFAIL: the driver asks for another attempt (slurm_rl.requeue)
REQUESTED_REQUEUE_LIMIT = 20  # attempts a job may ask for by itself (on top of --requeue for failures)


def shell_exit_code(returncode: int) -> int:
    """``subprocess`` return code -> what a shell would report (a signal N becomes 128 + N)."""
    return 128 - returncode if returncode < 0 else returncode


def describe_returncode(returncode: int, what: str = "driver") -> str:
    if returncode < 0:
        return f"{what} killed by signal {signal.Signals(-returncode).name}"
    return f"{what} exited {returncode}"


def exit_reason(rc: int, stop_reason: str) -> str:
    """Why the job ended, from the driver's return code and the stop its node received, if
    any. A driver that died of a signal after the node was told to stop (SLURM's SIGTERM at a
    time limit, scancel, preemption) names both: the stop is the cause, and the driver's signal
    need not be the same one (Ray's handlers can turn a SIGTERM into a SIGSEGV at exit)."""
    if not stop_reason:
        return describe_returncode(rc)
    return f"{stop_reason}; {describe_returncode(rc)}" if rc < 0 else stop_reason


def record_exit(
    paths: JobPaths, rc: int, reason: str, cause: Cause | None = None, *, keep_existing: bool = True
) -> bool:
    """Write the job's exit code, reason and cause (core/causes.py; none: core/ending.py reads it
    from the reason). With ``keep_existing`` (the default) the first writer wins: the node that
    saw the cause knows it best. Returns whether it wrote."""
    if keep_existing and paths.exit_code.exists():
        return False
    if cause is not None:
        write_atomic(paths.exit_cause, cause.line() + "\n")
    else:
        paths.exit_cause.unlink(missing_ok=True)
    write_atomic(paths.exit_reason, reason.strip() + "\n")
    write_atomic(paths.exit_code, f"{rc}\n")  # last: readers treat the code as "exit known"
    return True


def clear_exit(paths: JobPaths) -> None:
    """Forget an attempt's exit before the job is requeued."""
    for f in (paths.exit_code, paths.exit_reason, paths.exit_cause):
        f.unlink(missing_ok=True)


def read_exit(paths: JobPaths) -> tuple[int | None, str]:
    """(exit code or None while unknown, reason or "")."""
    try:
        text = paths.exit_code.read_text().strip()
        rc: int | None = int(text)
    except (FileNotFoundError, ValueError):
        rc = None
    try:
        reason = paths.exit_reason.read_text().strip()
    except FileNotFoundError:
        reason = ""
    return rc, reason


LOG_TAIL_BYTES = 64 * 1024  # of the driver's log, searched for a collective's timeout (core/ending.py)


def driver_log_tail(paths: JobPaths) -> str:
    """The driver log's last LOG_TAIL_BYTES, read from there (a log may be large); "" if none."""
    try:
        with open(paths.driver_log, "rb") as f:
            f.seek(0, 2)
            f.seek(max(0, f.tell() - LOG_TAIL_BYTES))
            return f.read().decode(errors="replace")
    except OSError:
        return ""


def read_cause(paths: JobPaths) -> Cause | None:
    """The recorded cause, or None (not recorded, or not one this slurm-rl knows)."""
    try:
        return parse_cause(paths.exit_cause.read_text())
    except (FileNotFoundError, UnicodeDecodeError):
        return None


@dataclass(frozen=True)
class OomKills:
    """What the kernel's OOM killer did on one node of a job (from its ``node_oom`` events)."""

    node: str
    kills: int
    limit: str  # e.g. "1500 MiB (--mem)"

    def text(self) -> str:
        return (
            f"{self.node}: the kernel's OOM killer killed {self.kills} process(es) of the job at the node's "
            f"limit of {self.limit}"
        )


_OLD_MESSAGE = re.compile(r"killed (\d+) process\(es\) of the job at the node's limit of (.*)$")


def oom_kills(events: list[dict[str, Any]]) -> list[OomKills]:
    """Per node, in the order first seen: processes killed for memory, and the limit."""
    per_node: dict[str, OomKills] = {}
    for e in events:
        if e.get("event") != "node_oom":
            continue
        node = str(e.get("node") or e.get("host") or "?")
        kills, limit = e.get("kills"), e.get("limit")
        if kills is None:  # an event of an older slurm-rl: the numbers are in its message
            m = _OLD_MESSAGE.search(str(e.get("message", "")))
            kills, limit = (int(m.group(1)), m.group(2)) if m else (1, "its memory limit")
        seen = per_node.get(node)
        per_node[node] = OomKills(node, (seen.kills if seen else 0) + int(kills), str(limit))
    return list(per_node.values())


def oom_line(kills: list[OomKills]) -> str:
    """One line for people: "OOM: node3: ... 4 process(es) ... 1500 MiB (--mem)"; "" if none."""
    return "OOM: " + "; ".join(k.text() for k in kills) if kills else ""


def with_oom_kills(reason: str, events: list[dict[str, Any]]) -> str:
    """``reason`` and, once, the OOM kills the nodes reported (``node_oom`` events)."""
    return with_kills(reason, oom_kills(events))


def with_kills(reason: str, kills: list[OomKills]) -> str:
    """``reason`` and, once, these OOM kills."""
    if not kills or "OOM:" in reason:
        return reason
    return f"{reason}; {oom_line(kills)}" if reason else oom_line(kills)


@dataclass(frozen=True)
class RayDeath:
    """One of Ray's daemons of the job that died while the job ran (a ``ray_died`` event)."""

    node: str
    daemon: str  # raylet, gcs_server
    how: str  # "killed by SIGKILL", "exited 1"
    t: float

    def text(self) -> str:
        return f"{self.node}'s {self.daemon} ({self.how}) at {time.strftime('%H:%M:%S', time.localtime(self.t))}"


def ray_deaths(events: list[dict[str, Any]]) -> list[RayDeath]:
    return [
        RayDeath(str(e.get("node", "?")), str(e.get("daemon", "?")), str(e.get("how", "")), float(e.get("t", 0)))
        for e in events
        if e.get("event") == "ray_died"
    ]


def with_ray_deaths(reason: str, deaths: list[RayDeath]) -> str:
    """``reason`` and, once, the Ray daemons that died under the job (the likely first cause)."""
    if not deaths or "Ray died:" in reason:
        return reason
    line = "Ray died: " + "; ".join(d.text() for d in deaths)
    return f"{reason}; {line}" if reason else line
