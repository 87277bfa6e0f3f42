"""A directory of this user's own, mode 0700, in a place every user may write (a shared fileroot,
a node's /tmp): made if missing, and refused when somebody else made it first or it is not a
directory (a link is never followed). One mechanism for the fileroot's ``<fileroot>/<user>``
(login/submission/user_dir.py) and a job's node-local dir (core/service_states.py)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from .errors import SlurmRlError


class ForeignDirError(SlurmRlError):
    """The path exists and is not a directory of this user's: ``uid`` made it (or it is not a
    directory: ``is_dir`` False). The message is the node-local dir's; callers may say more."""

    def __init__(self, path: str, uid: int, is_dir: bool) -> None:
        self.path, self.uid, self.is_dir = path, uid, is_dir
        super().__init__(
            f"the job's node-local dir {path} was made by uid {uid}, not this job's user "
            f"({os.geteuid()}): refusing to run the job's Ray in it (remove it as root)"
        )


def claim_private_dir(path: str | Path) -> Path:
    """``path`` (its parents made as needed), mode 0700 and this user's; raises ForeignDirError
    when it is not, and OSError when it cannot be made."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    try:
        p.mkdir(mode=0o700)
    except FileExistsError:
        pass
    info = p.lstat()
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid():
        raise ForeignDirError(str(p), info.st_uid, stat.S_ISDIR(info.st_mode))
    if stat.S_IMODE(info.st_mode) != 0o700:
        p.chmod(0o700)
    return p
