"""An instance of a part with an image of its own, run in that image by the part's supervisor step
(service_supervise.sh, started by the batch script), and driven from the node's service runner
(service_instances.py) through files in the job dir. The image needs bash (and util-linux when isolated),
not python nor slurm-rl. ``RemoteProcess`` answers what the runner asks of a local process:
``pid``, ``poll()``, ``wait()`` and its stop."""

from __future__ import annotations

import shlex
import subprocess
import time
from pathlib import Path

from ..core.events import write_atomic


def run_script(argv: list[str], env: dict[str, str], cwd: str, log: Path, drop: tuple[str, ...]) -> str:
    """The instance's script, as the supervisor runs it: ``env`` over the step's environment
    without the variables named by the prefixes ``drop``, in ``cwd``, output to ``log``."""
    lines = ["#!/bin/bash", f"exec >>{shlex.quote(str(log))} 2>&1"]
    if drop:
        cases = "|".join(f"{p}*" for p in drop)
        lines.append(f'for v in $(compgen -e); do case $v in {cases}) unset "$v";; esac; done')
    lines += [f"export {k}={shlex.quote(v)}" for k, v in sorted(env.items())]
    if cwd:
        lines.append(f"cd {shlex.quote(cwd)} || exit 127")
    lines.append("exec " + shlex.join(argv))
    return "\n".join(lines) + "\n"


class RemoteProcess:
    """Launch ``generation`` of an instance whose files start with ``base`` (``<dir>/<node>-<i>``)."""

    def __init__(self, base: Path, generation: int, script: str) -> None:
        self.base, self.gen = base, generation
        write_atomic(Path(f"{base}.run"), script)
        write_atomic(Path(f"{base}.want"), f"{generation} run\n")
        self.returncode: int | None = None

    def _read(self, suffix: str) -> tuple[str, str] | None:
        try:
            gen, value = Path(f"{self.base}.{suffix}").read_text().split()
        except (OSError, ValueError):
            return None
        return (gen, value) if gen == str(self.gen) else None

    @property
    def pid(self) -> int | None:
        got = self._read("pid")
        return int(got[1]) if got else None

    def poll(self) -> int | None:
        if self.returncode is None:
            got = self._read("exit")
            self.returncode = int(got[1]) if got else None
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        end = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if end is not None and time.monotonic() > end:
                raise subprocess.TimeoutExpired(str(self.base), timeout or 0)
            time.sleep(0.1)
        return self.returncode  # type: ignore[return-value]

    def stop(self, timeout: float = 10.0) -> None:
        """Ask the supervisor to end it (SIGTERM to its group, SIGKILL after 3 s); wait for that."""
        if self.poll() is not None:
            return
        write_atomic(Path(f"{self.base}.want"), f"{self.gen}s stop\n")
        try:
            self.wait(timeout)
        except subprocess.TimeoutExpired:
            pass
