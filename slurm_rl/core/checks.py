"""One line of `slurm-rl doctor`: ok, warn (works, with a caveat worth knowing), fail (a job
would fail or pend forever), or skip (not checked), with what was found and the fix."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Literal

Status = Literal["ok", "warn", "fail", "skip"]
MARK = {"ok": "✓", "warn": "!", "fail": "✗", "skip": "-"}


@dataclass(frozen=True)
class Check:
    name: str
    status: Status
    found: str
    fix: str = ""

    def line(self) -> str:
        return f"{MARK[self.status]} {self.name}: {self.found}" + (f"; fix: {self.fix}" if self.fix else "")

    def as_dict(self) -> dict[str, str]:
        return asdict(self)
