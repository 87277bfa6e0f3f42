"""--snapshot at submit: the repository's tracked files (as on disk) are what the job will run."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from slurm_rl.core.errors import UsageError
from slurm_rl.laptop.forward import _job_uploads
from slurm_rl.login.submission.snapshot import copy_snapshot, directory_files, repository_root
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


def test_another_users_repository_is_named_with_gits_own_fix(tmp_path: Path) -> None:
    """git refuses a repository another user owns (its safe.directory guard): said as that, with
    the owner and git's fix, not as "not in a git repository"."""
    if os.geteuid() != 0:
        pytest.skip("needs root, to hand the repository to another user")
    repo = git_repo(tmp_path / "repo")
    subprocess.run(["chown", "-R", "65534:65534", str(repo)], check=True)
    with pytest.raises(UsageError) as refused:
        repository_root(repo / "pkg" / "exp.py")
    said = str(refused.value)
    assert f"git refuses the repository {repo}" in said and "safe.directory" in said, said
    assert "not in a git repository" not in said


def test_the_manifest_names_the_repository(tmp_path: Path) -> None:
    repo = git_repo(tmp_path / "repo")
    spec = tmp_path / "s.json"
    spec.write_text(json.dumps({"cluster_name": "c", "fileroot": str(tmp_path / "root")}))
    res = run_cli("submit", str(spec), str(repo / "pkg" / "exp.py"), "-N", "1", "--snapshot", "--dry-run", "--json")
    assert res.returncode == 0, res.stderr
    manifest = json.loads(res.stdout)["manifest"]
    assert manifest["snapshot"] is True and manifest["snapshot_root"] == str(repo.resolve())


def test_a_job_of_services_copies_the_experiments_dir_but_hidden_files_and_caches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    exp = tmp_path / "exp"
    for d in ("lib", ".git", ".venv/bin", "__pycache__", "lib/node_modules"):
        (exp / d).mkdir(parents=True)
    for f in ("driver.py", "judge.py", "lib/util.py", ".env", ".git/HEAD", ".venv/bin/python", "__pycache__/x.pyc"):
        (exp / f).write_text("x\n")
    (exp / "lib" / "node_modules" / "big.js").write_text("x\n")
    assert directory_files(exp, "--parts") == ["driver.py", "judge.py", "lib/util.py"]
    monkeypatch.setattr("slurm_rl.login.submission.snapshot.COPY_MAX_FILES", 2)
    with pytest.raises(
        UsageError, match=r"^--parts: .*exp holds more than 2 files or 200 MB.*a directory of their own"
    ):
        directory_files(exp, "--parts")


def test_from_a_laptop_a_parts_job_uploads_the_parts_file_and_the_experiments_dir(tmp_path: Path) -> None:
    exp = tmp_path / "exp"
    exp.mkdir()
    for f in ("driver.py", "judge.py", "parts.yaml"):
        (exp / f).write_text("x\n")

    class Remote:
        spec = "/login/spec.json"

        def __init__(self) -> None:
            self.uploaded: dict[str, Path] = {}

        def upload(self, files: dict[str, Path], snapshot: bool) -> str:
            self.uploaded = dict(files)
            return "/login/up"

    remote = Remote()
    params = {"args": (str(exp / "driver.py"), "{judge.url}"), "parts_file": str(exp / "parts.yaml"), "snapshot": False}
    out, up = _job_uploads(params, remote, None)  # type: ignore[arg-type]
    assert up == "/login/up" and out["parts_file"] == "/login/up/parts.yaml"
    assert out["args"] == ("/login/spec.json", "/login/up/code/driver.py", "{judge.url}")
    assert {"code/driver.py", "code/judge.py", "parts.yaml"} <= set(remote.uploaded), remote.uploaded
