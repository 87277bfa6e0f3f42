"""--snapshot at submit: the repository's tracked files (as on disk) are what the job will run."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from slurm_rl.core.errors import UsageError
from slurm_rl.login.snapshot import copy_snapshot, repository_root
from tests.conftest import run_cli


def git_repo(root: Path) -> Path:
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "exp.py").write_text("from helper import VERSION\nprint(VERSION)\n")
    (root / "pkg" / "helper.py").write_text("VERSION = 'v1'\n")
    (root / "notes.txt").write_text("untracked\n")
    git = ["git", "-C", str(root), "-c", "user.email=t@t", "-c", "user.name=t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "pkg"], check=True)
    subprocess.run([*git, "commit", "-qm", "x"], check=True)
    return root


def test_tracked_files_as_on_disk_not_untracked_ones(tmp_path: Path) -> None:
    repo = git_repo(tmp_path / "repo")
    (repo / "pkg" / "helper.py").write_text("VERSION = 'edited, not committed'\n")
    assert repository_root(repo / "pkg" / "exp.py") == repo.resolve()
    assert copy_snapshot(repo, tmp_path / "code") == 2
    assert (tmp_path / "code" / "pkg" / "helper.py").read_text() == "VERSION = 'edited, not committed'\n"
    assert not (tmp_path / "code" / "notes.txt").exists()


def test_outside_a_repository_it_says_what_to_do(tmp_path: Path) -> None:
    lonely = tmp_path / "lonely.py"
    lonely.write_text("print(1)\n")
    with pytest.raises(UsageError, match="not in a git repository"):
        repository_root(lonely)
    spec = tmp_path / "s.json"
    spec.write_text(json.dumps({"cluster_name": "c", "fileroot": str(tmp_path / "root")}))
    res = run_cli("submit", str(spec), str(lonely), "-N", "1", "--snapshot", "--dry-run")
    assert res.returncode == 2 and "--snapshot" in res.stderr and len(res.stderr.strip().splitlines()) == 1


def test_the_manifest_names_the_repository(tmp_path: Path) -> None:
    repo = git_repo(tmp_path / "repo")
    spec = tmp_path / "s.json"
    spec.write_text(json.dumps({"cluster_name": "c", "fileroot": str(tmp_path / "root")}))
    res = run_cli("submit", str(spec), str(repo / "pkg" / "exp.py"), "-N", "1", "--snapshot", "--dry-run", "--json")
    assert res.returncode == 0, res.stderr
    manifest = json.loads(res.stdout)["manifest"]
    assert manifest["snapshot"] is True and manifest["snapshot_root"] == str(repo.resolve())
