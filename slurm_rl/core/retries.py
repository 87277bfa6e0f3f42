"""Retries by cause (``--retry-on CAUSES``, spec ``retry_on``): which causes of core/causes.py a
failed attempt may be retried for, within ``--requeue N``'s budget, and how the previous attempt
of a job ended is core/last_attempt.py's. Pure: the batch script's finalize tests the kinds and exit
codes rendered into it (templates/finalize.sh.j2); node 0 checks an attempt SLURM requeued by
itself (job/conclusion.py's ``refuse_retry``)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from . import causes as c
from .causes import Cause
from .events import write_atomic
from .paths import JobPaths

# a name of --retry-on: a family of causes, or one cause by its own name (docs/causes.md)
FAMILIES: dict[str, tuple[str, ...]] = {
    "node": (c.NODE_LOST, c.LAUNCH_FAILURE, c.PREFLIGHT),  # a node's fault, not the run's
    "preempted": (c.PREEMPTED,),
    "stalled": (c.STALLED,),
    "collective": (c.COLLECTIVE_TIMEOUT,),
    "oom": (c.OOM,),
    "ray": (c.RAY_DIED,),
    "service": (c.REQUIRED_SERVICE,),
    "driver": (c.DRIVER_ERROR, c.DRIVER_KILLED),
}
NEVER = (c.COMPLETED, c.CANCELLED, c.TIME_LIMIT, c.UNKNOWN)  # not failures a retry could mend
NAMES = (*FAMILIES, *(k for k in c.KINDS if k not in NEVER and k not in FAMILIES))
_EXIT = re.compile(r"^exit:(\d{1,3})$")


@dataclass(frozen=True)
class RetryOn:
    kinds: frozenset[str]
    exits: frozenset[int]  # a driver's own exit codes (exit:CODE)

    def covers(self, cause: Cause | None, code: int | None) -> bool:
        if cause is None:
            return False
        return cause.kind in self.kinds or (cause.kind == c.DRIVER_ERROR and code in self.exits)


def retry_on_problem(text: str) -> str | None:
    """Why ``text`` is not a --retry-on value, or None."""
    names = [n.strip() for n in text.split(",")]
    for name in names:
        if name.startswith("exit:") and not _EXIT.match(name):
            return f"{name!r}: an exit code is exit:CODE, CODE 1..255 (the driver's own, e.g. exit:3)"
        m = _EXIT.match(name)
        if m and not 1 <= int(m.group(1)) <= 255:
            return f"{name!r}: an exit code is 1..255"
        if not m and name not in NAMES:
            known = ", ".join(FAMILIES)
            return f"{name!r} is not a cause to retry on; use a comma list of {known}, exit:CODE (docs/causes.md)"
    return None


def parse_retry_on(text: str | None) -> RetryOn | None:
    """The value checked by ``retry_on_problem``; None when not given (every failure is retried)."""
    if not text:
        return None
    kinds: set[str] = set()
    exits: set[int] = set()
    for name in (n.strip() for n in text.split(",")):
        m = _EXIT.match(name)
        if m:
            exits.add(int(m.group(1)))
        else:
            kinds.update(FAMILIES.get(name, (name,)))
    return RetryOn(frozenset(kinds), frozenset(exits))


def shell_lists(text: str | None) -> tuple[str, str]:
    """(kinds, exit codes), space-separated, for finalize's shell test."""
    retry = parse_retry_on(text)
    if retry is None:
        return "", ""
    return " ".join(sorted(retry.kinds)), " ".join(map(str, sorted(retry.exits)))


def add_bad_nodes(paths: JobPaths, nodes: list[str]) -> None:
    """Add ``nodes`` to the job's bad_nodes (one per line, first seen first), which no later
    attempt is given (templates/finalize.sh.j2 excludes them)."""
    known = paths.bad_nodes.read_text().split() if paths.bad_nodes.exists() else []
    write_atomic(paths.bad_nodes, "".join(f"{n}\n" for n in dict.fromkeys([*known, *nodes])))
