"""How slurm-rl runs a SLURM command: an argv list (never a shell) with a timeout, failing
with ``SlurmCommandError`` (argv, exit code, stdout, stderr) or, where the command is not
installed, one ``UsageError`` line. Tests pass a fake ``Runner``; the lab uses this one."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..core.errors import SlurmCommandError, UsageError


@dataclass(frozen=True)
class Completed:
    returncode: int
    stdout: str
    stderr: str


Runner = Callable[[Sequence[str], float], Completed]


def subprocess_runner(argv: Sequence[str], timeout_s: float) -> Completed:
    try:
        p = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired as exc:
        raise SlurmCommandError(
            argv, None, _text(exc.stdout), _text(exc.stderr), hint=f"no answer within {timeout_s:g} s; is slurmctld up?"
        ) from None
    except FileNotFoundError:
        raise UsageError(
            f"`{argv[0]}` is not installed or not on PATH; run slurm-rl on a SLURM "
            f"login node, or use `slurm-rl run` for a local run"
        ) from None
    return Completed(p.returncode, p.stdout, p.stderr)


def with_slurm_conf(runner: Runner, slurm_conf: str) -> Runner:
    """``runner`` for one cluster of several on this machine: each command under env(1) with
    ``SLURM_CONF`` (the spec's ``slurm_conf``); a command env(1) cannot find is the same one line."""

    def run(argv: Sequence[str], timeout_s: float) -> Completed:
        if runner is subprocess_runner and not Path(slurm_conf).is_file():  # SLURM retries for ~10 s
            raise SlurmCommandError(argv, 1, "", "", hint=f"its SLURM config {slurm_conf} is not on this machine")
        res = runner(["env", f"SLURM_CONF={slurm_conf}", *argv], timeout_s)
        if res.returncode == 127 and not res.stdout and "No such file" in res.stderr:
            subprocess_runner(list(argv), timeout_s)  # its UsageError, as without SLURM_CONF
        return res

    return run


def client_installed() -> bool:
    """Whether this machine has SLURM's client commands (a login node, not a laptop)."""
    return shutil.which("sbatch") is not None


def _text(b: bytes | str | None) -> str:
    if b is None:
        return ""
    return b.decode(errors="replace") if isinstance(b, bytes) else b
