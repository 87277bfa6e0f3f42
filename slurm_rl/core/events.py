"""Files other processes read while a job runs: written atomically (temp file + rename) or
appended in one write (events.jsonl lines are short, and O_APPEND writes of one line do not
interleave), so a reader never sees half a record.
"""

from __future__ import annotations

import json
import os
import socket
import tempfile
import time
from pathlib import Path
from typing import Any


def write_atomic(path: Path, data: str | bytes, make_parents: bool = True) -> None:
    """``path`` holds ``data`` whole or keeps what it held: a temp file beside it, renamed over it
    (the one way slurm-rl writes a file another process may read; tests/unit/test_rules.py).
    ``make_parents=False``: a missing directory is FileNotFoundError, not made."""
    if make_parents:
        path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb" if isinstance(data, bytes) else "w") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def write_json(path: Path, data: Any) -> None:
    write_atomic(path, json.dumps(data, indent=2, sort_keys=True) + "\n")


def read_json(path: Path, default: Any = None) -> Any:
    try:
        return json.loads(path.read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return default


def append_event(path: Path, event: str, **fields: Any) -> dict[str, Any]:
    """Append one timestamped line: {"t": unix seconds, "event": ..., "host": ..., ...}."""
    rec = {"t": round(time.time(), 4), "event": event, "host": socket.gethostname(), **fields}
    line = (json.dumps(rec, sort_keys=True) + "\n").encode()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)
    return rec


def read_events(path: Path) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    try:
        text = path.read_text()
    except FileNotFoundError:
        return out
    for line in text.splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            continue  # a line being written right now
    return out
