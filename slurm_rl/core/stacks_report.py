"""The stacks of a job as people read them: identical stacks grouped with their count, ranks and
nodes; the odd ones out first (a rank whose stack differs from its peers': the one that never
joined the collective the others wait in), then the driver, then the rest, idle workers last."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from .stacks import ProcessStack

SHOWN_FRAMES = 12  # innermost frames shown per group


@dataclass
class Group:
    stacks: list[ProcessStack]
    odd: bool = False  # its title is shared by a larger group with another stack

    @property
    def first(self) -> ProcessStack:
        return self.stacks[0]

    def head(self) -> str:
        s, n = self.first, len(self.stacks)
        noun = s.role if n == 1 else f"{s.role}s"
        ranks = [p.rank for p in self.stacks if p.rank]
        where = ",".join(sorted({p.node for p in self.stacks}))
        pids = ",".join(str(p.pid) for p in self.stacks[:8]) + (",..." if n > 8 else "")
        rank_text = f"rank{'s' if len(ranks) > 1 else ''} {','.join(sorted(ranks, key=_num))} " if ranks else ""
        odd = "  <- differs from its peers" if self.odd else ""
        return f"{n} {noun}: {rank_text}on {where} (pid {pids}), {s.title}{odd}"


def _num(rank: str) -> tuple[int, str]:
    return (int(rank), "") if rank.isdigit() else (1 << 30, rank)


def group(stacks: list[ProcessStack]) -> list[Group]:
    """Processes with the same role, title and main-thread frames, in reading order."""
    by_key: dict[tuple[str, str, tuple[str, ...], str], list[ProcessStack]] = {}
    for s in stacks:
        by_key.setdefault((s.role, s.title, tuple(s.main), s.error), []).append(s)
    groups = [Group(v) for v in by_key.values()]
    largest: dict[str, int] = {}
    for g in groups:
        largest[g.first.title] = max(largest.get(g.first.title, 0), len(g.stacks))
    for g in groups:
        g.odd = g.first.role != "driver" and len(g.stacks) < largest[g.first.title]
    groups.sort(
        key=lambda g: (
            not g.odd,
            g.first.role != "driver",
            g.first.title.startswith("ray::IDLE"),
            -len(g.stacks),
            g.first.node,
            g.first.pid,
        )
    )
    return groups


def render(job_id: str, answers: dict[str, list[ProcessStack]], missing: list[str], kept_at: Path | None) -> str:
    """The report: a summary line, each group with its innermost frames, nodes that did not answer."""
    stacks = [s for node in sorted(answers) for s in answers[node]]
    where = f" (kept in {kept_at})" if kept_at else ""
    lines = [
        f"stacks of job {job_id}: {len(stacks)} processes on {len(answers)} node(s), {time.strftime('%H:%M:%S')}{where}"
    ]
    for g in group(stacks):
        lines.append("")
        lines.append(g.head())
        if g.first.error:
            lines.append(f"    ({g.first.error})")
            continue
        frames = g.first.main
        lines.extend(f"    {f}" for f in frames[:SHOWN_FRAMES])
        if len(frames) > SHOWN_FRAMES:
            lines.append(f"    ... {len(frames) - SHOWN_FRAMES} outer frames")
        if not frames:
            lines.append("    (no Python frames)")
        for s in g.stacks:
            if s.native:
                lines.append(f"    native frames of pid {s.pid} on {s.node} (py-spy):")
                lines.extend(f"      {line}" for line in s.native.splitlines())
    for node in missing:
        lines.append("")
        lines.append(f"{node}: no answer (its bootstrap did not reply: node lost or overloaded?)")
    return "\n".join(lines) + "\n"
