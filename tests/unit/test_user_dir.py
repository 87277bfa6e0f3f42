"""Your directory under a shared fileroot, and a job's node-local dir: yours, 0700, or refused."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from slurm_rl.core.errors import UsageError
from slurm_rl.core.private_dir import ForeignDirError, claim_private_dir
from slurm_rl.login.submission.user_dir import own_user_dir

STRANGER = 54321  # a uid nobody has: chown as root (the unit tests run as root in CI)


def test_your_dir_is_made_0700_whatever_the_umask(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        path = own_user_dir(str(tmp_path / "fileroot"), "alice")
    finally:
        os.umask(old)
    assert path == tmp_path / "fileroot" / "alice" and path.stat().st_mode & 0o777 == 0o700
    path.chmod(0o755)
    own_user_dir(str(tmp_path / "fileroot"), "alice")  # yours, opened: closed again
    assert path.stat().st_mode & 0o777 == 0o700


@pytest.mark.skipif(os.geteuid() != 0, reason="making a dir of another uid needs root")
def test_a_dir_somebody_else_made_first_is_refused_naming_its_owner(tmp_path: Path) -> None:
    planted = tmp_path / "alice"
    planted.mkdir(mode=0o777)
    os.chown(planted, STRANGER, STRANGER)
    with pytest.raises(UsageError, match=f"belongs to uid {STRANGER}, not you"):
        own_user_dir(str(tmp_path), "alice")
    temp = tmp_path / "srl-7"
    temp.mkdir()
    os.chown(temp, STRANGER, STRANGER)
    with pytest.raises(ForeignDirError, match=f"made by uid {STRANGER}"):
        claim_private_dir(str(temp))


def test_a_link_in_place_of_your_dir_is_never_followed(tmp_path: Path) -> None:
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "alice").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(UsageError, match="not a directory"):
        own_user_dir(str(tmp_path), "alice")
    (tmp_path / "srl-8").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(ForeignDirError):
        claim_private_dir(str(tmp_path / "srl-8"))


def test_the_node_local_dir_is_made_0700(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        claim_private_dir(str(tmp_path / "srl-9"))
    finally:
        os.umask(old)
    assert (tmp_path / "srl-9").stat().st_mode & 0o777 == 0o700
