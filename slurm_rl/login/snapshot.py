"""``--snapshot``: the job runs from a copy of the experiment's git repository made at submit.

A job can wait hours in the queue; without a snapshot it then imports whatever the repository
holds when it starts. With one, the git-tracked files of the repository that holds the
experiment (as they are on disk at submit, uncommitted edits included; untracked files not) are
copied into ``<job dir>/code/``; the driver runs the experiment's copy there, imports resolve
there first, and a working directory inside the repository maps to the same place in the copy.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from ..core.errors import UsageError

SNAPSHOT_DIR = "code"


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
    if out.returncode != 0:
        raise UsageError(
            f"--snapshot: {experiment} is not in a git repository (it copies the repository's tracked files); "
            f"`git init && git add` the code it needs, or submit without --snapshot"
        )
    return Path(out.stdout.strip()).resolve()


def tracked_files(root: Path) -> list[str]:
    out = subprocess.run(
        ["git", "-C", str(root), "ls-files", "-z", "--cached"], capture_output=True, timeout=60, check=True
    )
    return [p for p in out.stdout.decode(errors="surrogateescape").split("\0") if p]


def copy_snapshot(root: Path, destination: Path) -> int:
    """Copy the tracked files of ``root`` (as on disk) under ``destination``; how many."""
    count = 0
    for rel in tracked_files(root):
        src = root / rel
        if not src.is_file():  # deleted in the work tree, or a submodule: not part of the snapshot
            continue
        dst = destination / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dst, follow_symlinks=False)
        count += 1
    return count
