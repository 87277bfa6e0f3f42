"""Field types shared by the cluster spec and the job options: each check is written once.

A value that reaches an ``#SBATCH`` line, a node-type regex table, a SLURM time: the spec
(site defaults) and the job options (flags) validate them with the same types, and node names
are matched against the type tables by one function (``first_match``, a full match).
"""

from __future__ import annotations

import ipaddress
import math
import re
from typing import Annotated, Any

from pydantic import AfterValidator

from .errors import SlurmRlError

# What may reach an #SBATCH line as a partition, account or QOS name ("," separates several)
SBATCH_NAME = re.compile(r"^[A-Za-z0-9_.-]+(,[A-Za-z0-9_.-]+)*$")
_TIME = re.compile(r"^(\d+-)?\d+(:\d{1,2}){0,2}$|^\d+-\d+$")


def _sbatch_name(v: str) -> str:
    if not SBATCH_NAME.match(v):
        raise ValueError(
            "has characters SLURM does not allow in names (letters, digits, '_', '.', '-'; ',' between several)"
        )
    return v


_NO_LIMIT_WORDS = ("UNLIMITED", "INFINITE")


def slurm_time(v: str) -> str:
    if not (_TIME.match(v) or v.upper() in _NO_LIMIT_WORDS):
        raise ValueError("is not a SLURM time; use MM, HH:MM:SS or D-HH:MM:SS, e.g. 1:00:00 (0 or UNLIMITED: none)")
    return v


def _regex_table(v: dict[str, str]) -> dict[str, str]:
    for pattern in v:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise ValueError(f"regex {pattern!r} does not compile ({exc})") from None
    return v


def rule(check: Any) -> Any:
    """A pydantic validator from ``check(value) -> problem or None`` (the problem is the message)."""

    def validate(v: Any) -> Any:
        problem = check(v)
        if problem:
            raise ValueError(problem)
        return v

    return AfterValidator(validate)


def _pattern(regex: str, problem: str) -> Any:
    compiled = re.compile(regex)
    return rule(lambda v: None if compiled.fullmatch(v) else problem)


def _hostlist(v: str) -> str:
    from .errors import UsageError
    from .nodelist import expand_hostlist

    try:
        expand_hostlist(v)
    except UsageError as exc:
        raise ValueError(str(exc)) from None
    return v


MAIL_TYPES = {
    "NONE",
    "BEGIN",
    "END",
    "FAIL",
    "REQUEUE",
    "ALL",
    "INVALID_DEPEND",
    "STAGE_OUT",
    "TIME_LIMIT",
    "TIME_LIMIT_90",
    "TIME_LIMIT_80",
    "TIME_LIMIT_50",
    "ARRAY_TASKS",
}


def _network_interface(v: str) -> str:
    """An interface name (ib0, enp1s0f0, bond0.100) or an IPv4/IPv6 network (10.78.0.0/16)."""
    if "/" in v:
        try:
            ipaddress.ip_network(v, strict=False)
        except ValueError:
            raise ValueError("is not a network; write one like 10.78.0.0/16, or an interface name like ib0") from None
        return v
    if not re.fullmatch(r"[A-Za-z0-9_.:@-]{1,15}", v):
        raise ValueError("is not an interface name (like ib0) or a network (like 10.78.0.0/16)")
    return v


def _mail_types(v: str) -> str:
    bad = [t for t in v.split(",") if t.upper() not in MAIL_TYPES]
    if bad:
        raise ValueError(f"{bad[0]!r} is not a mail type; use {', '.join(sorted(MAIL_TYPES))}")
    return v


SlurmName = Annotated[str, AfterValidator(_sbatch_name)]
SlurmMemory = Annotated[str, _pattern(r"\d+[KMGT]?", "is not a SLURM memory size; use e.g. 64G, 500M or 2000 (MB)")]
HostList = Annotated[str, AfterValidator(_hostlist)]
Constraint = Annotated[
    str, _pattern(r"[A-Za-z0-9_.\-&|,\[\]*:()!]+", "is not a node feature expression; use e.g. a100, a100&ib or [a|b]")
]
Gres = Annotated[str, _pattern(r"[A-Za-z0-9_.:,\-]+", "is not a GRES list; use e.g. gpu:8 or gpu:a100:4")]
Dependency = Annotated[
    str, _pattern(r"[A-Za-z_]+(:[0-9_+]+)*([,?][A-Za-z_]+(:[0-9_+]+)*)*", "is not a dependency; use e.g. afterok:1234")
]
MailTypes = Annotated[str, AfterValidator(_mail_types)]
MailUser = Annotated[str, _pattern(r"[^\s'\"]+", "is not a mail address")]
OneLine = Annotated[str, _pattern(r"[^\n\r]*", "must be one line")]
SlurmTime = Annotated[str, AfterValidator(slurm_time)]
RegexTable = Annotated[dict[str, str], AfterValidator(_regex_table)]
NetworkInterface = Annotated[str, AfterValidator(_network_interface)]


class FieldProblem(SlurmRlError, ValueError):
    """A cross-field problem that must be reported against one named field."""

    def __init__(self, field: str, value: Any, problem: str) -> None:
        super().__init__(problem)
        self.field, self.value, self.problem = field, value, problem


def first_match(table: dict[str, str], name: str) -> str | None:
    """The value of the first regex in ``table`` that matches all of ``name``, else None.

    A full match: ``node\\d`` does not give ``node10`` a type by its prefix. The spec's check
    (``spec validate --nodelist``) and the Ray resources a node gets use this one function."""
    for pattern, kind in table.items():
        if re.fullmatch(pattern, name):
            return kind
    return None


def time_minutes(value: str, *, limit: bool = True) -> float:
    """A SLURM time (MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS) in minutes; ``inf`` for no
    limit, as sbatch reads a limit: ``UNLIMITED``, ``INFINITE`` or (``limit``) a time of zero."""
    if value.upper() in _NO_LIMIT_WORDS:
        return math.inf
    days, _, rest = value.rpartition("-")
    parts = [int(p) for p in rest.split(":")]
    if days:
        hours, minutes, seconds = [*parts, 0, 0][:3]
    elif len(parts) == 3:
        hours, minutes, seconds = parts
    else:
        hours, minutes, seconds = 0, parts[0], (parts[1] if len(parts) > 1 else 0)
    total = int(days or 0) * 1440 + hours * 60 + minutes + seconds / 60
    return math.inf if limit and total == 0 else total


def human_time_limit(time_limit: str | None) -> str:
    """A SLURM time as people say it: ``1`` -> ``1 min``, ``2:00:00`` -> ``2 h``; seconds as
    SLURM applies them (``0:30`` is 1 min)."""
    if not time_limit:
        return "the partition's limit"
    minutes = time_minutes(time_limit)
    if math.isinf(minutes):  # --time 0 or UNLIMITED: none of the job's own
        return "the partition's limit"
    whole = math.ceil(minutes)  # SLURM keeps time limits in whole minutes, rounded up
    said = f"{whole:g} min" if whole < 120 else f"{whole / 60:g} h"
    return said if whole == minutes else f"{said}: SLURM rounds --time {time_limit} up to whole minutes"


def memory_mb(size: str) -> float:
    """A SLURM memory size (default unit MB) in MB."""
    units = {"K": 1 / 1024, "M": 1, "G": 1024, "T": 1024**2}
    return float(size[:-1]) * units[size[-1]] if size[-1] in units else float(size)
