"""Your directory under the fileroot, ``<fileroot>/<user>``: every job dir of yours is inside it.

The fileroot of a site is shared by its users (a scratch directory everyone may write, sticky,
as /tmp), so the directory named after you is trusted only when it is yours: made by you, mode
0700, and never one somebody else made first (who could then read, replace or watch what your
jobs write there).
"""

from __future__ import annotations

import pwd
from pathlib import Path

from ...core.errors import UsageError
from ...core.private_dir import ForeignDirError, claim_private_dir


def owner_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def own_user_dir(fileroot: str, user: str) -> Path:
    """``<fileroot>/<user>``, made mode 0700 if missing (core/private_dir.py); a usage error
    naming the owner and the fix when it is not a directory of yours."""
    path = Path(fileroot) / user
    try:
        return claim_private_dir(path)
    except ForeignDirError as exc:
        if not exc.is_dir:
            raise UsageError(
                f"fileroot: {path} is not a directory (a link or a file is never followed); remove it"
            ) from None
        raise UsageError(
            f"fileroot: {path} belongs to {owner_name(exc.uid)}, not you: your job dirs go only into a "
            f"directory of yours; ask the site to remove it, or set fileroot to a path of your own"
        ) from None
    except OSError as exc:
        raise UsageError(
            f"fileroot: cannot create {path} ({exc.strerror}); set fileroot to a writable shared path"
        ) from None
