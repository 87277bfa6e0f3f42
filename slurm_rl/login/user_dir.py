"""Your directory under the fileroot, ``<fileroot>/<user>``: every job dir of yours is inside it.

The fileroot of a site is shared by its users (a scratch directory everyone may write, sticky,
as /tmp), so the directory named after you is trusted only when it is yours: made by you, mode
0700, and never one somebody else made first (who could then read, replace or watch what your
jobs write there).
"""

from __future__ import annotations

import os
import pwd
import stat
from pathlib import Path

from ..core.errors import UsageError


def owner_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def own_user_dir(fileroot: str, user: str) -> Path:
    """``<fileroot>/<user>``, made mode 0700 if missing; a usage error naming the owner and the
    fix when it is not a directory of yours."""
    path = Path(fileroot) / user
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            path.mkdir(mode=0o700)
        except FileExistsError:
            pass
        info = path.lstat()
    except OSError as exc:
        raise UsageError(
            f"fileroot: cannot create {path} ({exc.strerror}); set fileroot to a writable shared path"
        ) from None
    if not stat.S_ISDIR(info.st_mode):
        raise UsageError(f"fileroot: {path} is not a directory (a link or a file is never followed); remove it")
    if info.st_uid != os.geteuid():
        raise UsageError(
            f"fileroot: {path} belongs to {owner_name(info.st_uid)}, not you: your job dirs go only into a "
            f"directory of yours; ask the site to remove it, or set fileroot to a path of your own"
        )
    if stat.S_IMODE(info.st_mode) != 0o700:
        path.chmod(0o700)  # yours: nobody else lists your jobs' names
    return path
