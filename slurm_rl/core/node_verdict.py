"""Preflight's results and their judgement (--preflight; job/node_checks.py runs the checks on every
node): a node's checks, each passed or not with what it measured, and the first bad node of a
job, a collective far slower through one node than through the others counted as bad. Pure."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

MIN_FREE_BYTES = 1 << 30  # free in the node's temp dir and under the fileroot
SLOW_FACTOR = 5.0  # a node's transfer this many times the fastest other's is a slow node ...
SLOW_MIN_S = 0.5  # ... when it took at least this long (a fast fabric's jitter is no fault)
CHECKS = ("python", "gpus", "disk", "fabric", "collective")


@dataclass(frozen=True)
class Check:
    name: str  # one of CHECKS
    ok: bool
    found: str  # what was measured, for people ("0.2 GiB free in /tmp/srl-42 (needs 1.0 GiB)")
    seconds: float | None = None  # a transfer's time (the collective's per-sender figure)


@dataclass(frozen=True)
class NodeResult:
    node: str
    rank: int
    checks: tuple[Check, ...] = ()
    done: bool = False  # every check ran (the local ones are published first)
    seconds: float = 0.0  # how long this node's preflight took

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "checks": [asdict(ch) for ch in self.checks]}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> NodeResult:
        checks = tuple(Check(**{k: v for k, v in ch.items() if k in Check.__dataclass_fields__}) for ch in d["checks"])
        return cls(str(d["node"]), int(d["rank"]), checks, bool(d.get("done")), float(d.get("seconds") or 0))


@dataclass(frozen=True)
class Verdict:
    bad: tuple[tuple[str, str, str], ...] = field(default=())  # (node, check, found), the first first
    complete: bool = False  # every node's result is in

    @property
    def ok(self) -> bool:
        return self.complete and not self.bad


def judge(results: list[NodeResult], nodes: int) -> Verdict:
    """The bad nodes so far (a failed check is known at once, whatever the rest), and whether
    every one of ``nodes`` results is in; then a node whose transfer was far slower than the
    others' is bad too. A collective that failed everywhere is blamed on the node that said why."""
    bad: list[tuple[str, str, str]] = []
    failed_collective = []
    for r in sorted(results, key=lambda r: r.rank):
        for ch in r.checks:
            if ch.ok:
                continue
            if ch.name == "collective" and not ch.found.startswith(r.node):
                failed_collective.append((r.node, ch.name, ch.found))  # a consequence, unless named
                continue
            bad.append((r.node, ch.name, ch.found))
            break
    complete = len({r.rank for r in results if r.done}) >= nodes
    if complete and not bad:
        bad += failed_collective[:1] + slow_nodes(results)
    return Verdict(tuple(bad), complete)


def slow_nodes(results: list[NodeResult]) -> list[tuple[str, str, str]]:
    """Senders whose transfer took SLOW_FACTOR times the fastest other's, and SLOW_MIN_S at least."""
    times = {
        r.node: ch.seconds for r in results for ch in r.checks if ch.name == "collective" and ch.seconds is not None
    }
    out = []
    for node, t in times.items():
        others = [s for n, s in times.items() if n != node]
        if others and t >= SLOW_MIN_S and t > SLOW_FACTOR * min(others):
            out.append((node, "collective", f"its sends took {t:.2f} s, the fastest other node's {min(others):.3f} s"))
    return out
