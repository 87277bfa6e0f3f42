"""``--snapshot``: the job runs from a copy of the experiment's git repository made at submit.

A job can wait hours in the queue; without a snapshot it then imports whatever the repository
holds when it starts. With one, the git-tracked files of the repository that holds the
experiment (as they are on disk at submit, uncommitted edits included; untracked files not) are
copied into ``<job dir>/code/``; the driver runs the experiment's copy there, imports resolve
there first, and a working directory inside the repository maps to the same place in the copy.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

from ...core.errors import UsageError

SNAPSHOT_DIR = "code"
# a job of services copies the experiment's directory for them: what such a copy may carry
COPY_MAX_FILES = 2000
COPY_MAX_MB = 200
COPY_SKIPS = ("__pycache__", "node_modules")


def repository_root(experiment: Path) -> Path:
    """The top of the git repository holding ``experiment``; UsageError naming the fix if none."""
    try:
        out = subprocess.run(
            ["git", "-C", str(experiment.parent), "rev-parse", "--show-toplevel"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except FileNotFoundError:
        raise UsageError("--snapshot: git is not installed here; install it, or submit without --snapshot") from None
    refused = re.search(r"dubious ownership in repository at '(.+?)'", out.stderr)  # another user's repository
    if out.returncode != 0 and refused:
        top = Path(refused.group(1))
        raise UsageError(
            f"--snapshot: git refuses the repository {top}: it belongs to {owner_of(top)}, not you; if you trust "
            f"it, `git config --global --add safe.directory {top}`, or submit from a clone of your own, or "
            f"without --snapshot"
        )
    if out.returncode != 0:
        raise UsageError(
            f"--snapshot: {experiment} is not in a git repository (it copies the repository's tracked files); "
            f"`git init && git add` the code it needs, or submit without --snapshot"
        )
    return Path(out.stdout.strip()).resolve()


def owner_of(path: Path) -> str:
    """The name (else the uid) of ``path``'s owner."""
    try:
        return path.owner()
    except KeyError:
        return f"uid {path.stat().st_uid}"


def tracked_files(root: Path) -> list[str]:
    out = subprocess.run(
        ["git", "-C", str(root), "ls-files", "-z", "--cached"], capture_output=True, timeout=60, check=True
    )
    return [p for p in out.stdout.decode(errors="surrogateescape").split("\0") if p]


def directory_files(root: Path, why: str) -> list[str]:
    """The files under ``root`` that a copy of it carries (relative paths): all but hidden ones
    (``.git``, ``.venv``), ``__pycache__`` and ``node_modules``. More than COPY_MAX_FILES files
    or COPY_MAX_MB is a UsageError naming ``why`` and the fix, before anything is queued."""
    files, size = [], 0
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and d not in COPY_SKIPS)
        for name in sorted(filenames):
            path = Path(dirpath) / name
            if name.startswith(".") or not path.is_file():
                continue
            files.append(str(path.relative_to(root)))
            size += path.stat().st_size
            if len(files) > COPY_MAX_FILES or size > COPY_MAX_MB * 2**20:
                raise UsageError(
                    f"{why}: {root} holds more than {COPY_MAX_FILES} files or {COPY_MAX_MB} MB, which the job would "
                    f"copy for its services; keep the experiment and its services' code in a directory of their "
                    f"own, or use --snapshot (the repository's tracked files)"
                )
    return files


def copy_snapshot(root: Path, destination: Path) -> int:
    """Copy the tracked files of ``root`` (as on disk) under ``destination``; how many."""
    return copy_files(root, tracked_files(root), destination)


def copy_files(root: Path, files: list[str], destination: Path) -> int:
    """Copy ``files`` (relative to ``root``, as on disk) under ``destination``; how many."""
    count = 0
    for rel in files:
        src = root / rel
        if not src.is_file():  # deleted in the work tree, or a submodule: not part of the snapshot
            continue
        dst = destination / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dst, follow_symlinks=False)
        count += 1
    return count
