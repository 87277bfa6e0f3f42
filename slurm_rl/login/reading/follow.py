"""Following a job's logs: new lines of a growing file, a whole file as it grows (``logs -f``),
and the last Python traceback of a log (what a failed job's user needs first)."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path


class LogFollower:
    """New complete lines of a growing log file, from where the last call stopped."""

    def __init__(self, path: Path) -> None:
        self.path, self.offset, self.partial = path, 0, b""

    def new_lines(self) -> list[str]:
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read()
        except FileNotFoundError:
            return []
        self.offset += len(data)
        *lines, self.partial = (self.partial + data).split(b"\n")
        return [line.decode(errors="replace") for line in lines]


def last_traceback(log: Path, lines: int = 12) -> list[str]:
    """The last Python traceback in a log, its last ``lines`` lines (where the error is), or []."""
    try:
        text = log.read_text(errors="replace").splitlines()
    except FileNotFoundError:
        return []
    starts = [i for i, line in enumerate(text) if line.startswith("Traceback (most recent call last)")]
    if not starts:
        return []
    block = text[starts[-1] :]
    end = next((i + 1 for i, line in enumerate(block) if i > 0 and line and not line[0].isspace()), len(block))
    return block[:end][-lines:]


def follow_file(path: Path, done: Callable[[], bool], poll_s: float = 0.5) -> None:
    """Print a file as it grows until ``done()``; then print what is left."""
    follower = LogFollower(path)
    while True:
        finished = done()
        for line in follower.new_lines():
            sys.stdout.write(line + "\n")
        sys.stdout.flush()
        if finished:
            if follower.partial:
                sys.stdout.write(follower.partial.decode(errors="replace") + "\n")
            return
        time.sleep(poll_s)
