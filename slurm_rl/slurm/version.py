"""Which SLURM a site runs, and what slurm-rl may use of it.

slurm-rl asks once per command (``sinfo --version``, a local call that needs no controller) and
then chooses by version: JSON output (``--json``, with the versioned data_parser plugins from
23.02), ``--segment`` with the block topology (23.11), and a refusal, in one line, for a SLURM
older than the oldest one it supports."""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..core.errors import UsageError

OLDEST_SUPPORTED = (22, 5)
# Proven end to end on the lab (tests/lab/slurm-lab up --slurm VERSION); the versions between
# them are supported (SLURM keeps its commands' flags and output across them).
PROVEN = ("22.05", "24.11", "26.05")


@dataclass(frozen=True, order=True)
class SlurmVersion:
    major: int
    minor: int
    micro: int = 0

    @classmethod
    def parse(cls, text: str) -> SlurmVersion:
        """``slurm 24.11.5``, ``slurm-wlm 22.05.8`` or ``24.11.0-0rc1`` -> SlurmVersion."""
        m = re.search(r"(\d+)\.(\d+)(?:\.(\d+))?", text)
        if m is None:
            raise ValueError(f"no SLURM version in {text.strip()!r}")
        return cls(int(m.group(1)), int(m.group(2)), int(m.group(3) or 0))

    def __str__(self) -> str:
        return f"{self.major}.{self.minor:02d}.{self.micro}"

    @property
    def release(self) -> str:
        """The release series, as SLURM names it: 24.11."""
        return f"{self.major}.{self.minor:02d}"

    @property
    def supported(self) -> bool:
        return (self.major, self.minor) >= OLDEST_SUPPORTED

    @property
    def json_parsers(self) -> bool:
        """``squeue/sacct/sinfo --json`` through the versioned data_parser plugins (23.02+);
        22.05's serializer answers with another schema, which slurm-rl does not read."""
        return (self.major, self.minor) >= (23, 2)

    @property
    def segments(self) -> bool:
        """``--segment`` and ``topology/block`` (23.11+)."""
        return (self.major, self.minor) >= (23, 11)


def supported_text() -> str:
    """One line for the README, ``doctor`` and the refusal."""
    oldest = f"{OLDEST_SUPPORTED[0]}.{OLDEST_SUPPORTED[1]:02d}"
    return f"SLURM {oldest} or newer (proven on {', '.join(PROVEN)})"


def require_supported(version: SlurmVersion) -> SlurmVersion:
    if not version.supported:
        raise UsageError(
            f"this site runs SLURM {version}; slurm-rl needs {supported_text()}: "
            "ask your admins which login nodes have a newer SLURM client"
        )
    return version
