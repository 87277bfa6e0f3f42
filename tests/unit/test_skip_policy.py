"""Under CI=true a skip not on tests/ci_skips.toml fails the pytest run and is printed with its
reason (tests/skip_policy.py); one on the list is printed as allowed; outside CI a skip passes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.skip_policy import LIST, LIST_ENV, load

TESTS = """
import pytest

def test_runs():
    pass

def test_lost_its_runtime():
    pytest.skip("the lab has no Pyxis: no Pyxis/enroot sources")

def test_gpu_only():
    pytest.skip("needs NCCL (a GPU machine)")

@pytest.mark.parametrize("n", [1, 2])
def test_under_xdist(n):
    if n == 2:
        pytest.skip("one command was slow")
"""
ALLOWED = """
[[skip]]
test = "*::test_gpu_only"
reason = "needs NCCL"
why = "CI has no GPU"
"""


def _pytest(tmp_path: Path, ci: str, *extra: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "test_some.py").write_text(TESTS)
    (tmp_path / "skips.toml").write_text(ALLOWED)
    env = {**os.environ, "CI": ci, LIST_ENV: str(tmp_path / "skips.toml"), "PYTHONPATH": str(REPO)}
    env.pop("PYTEST_XDIST_WORKER", None)
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "tests.skip_policy", "-p", "no:cacheprovider"]
    # its own basetemp: a pytest that makes one under /tmp/pytest-of-USER closes that dir to
    # others again (0700), and the lab tests beside it hand their tmp_path to a lab user through it
    argv += ["--basetemp", str(tmp_path / "inner"), "--rootdir", str(tmp_path), "-c", os.devnull, *extra]
    root = next((p for p in tmp_path.parents if p.name.startswith("pytest-of-")), tmp_path)
    root.chmod(root.stat().st_mode | 0o001)  # traversable, as a lab test hands its tmp_path on
    mode = root.stat().st_mode
    res = subprocess.run(
        [*argv, str(tmp_path / "test_some.py")], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120
    )
    assert root.stat().st_mode == mode, f"the inner pytest changed {root}'s mode"
    return res


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["plain", "xdist"])
def test_under_ci_a_skip_not_on_the_list_fails_the_run_and_is_named(tmp_path: Path, workers: list[str]) -> None:
    res = _pytest(tmp_path, "true", *workers)
    assert res.returncode == 1, res.stdout + res.stderr
    assert "2 passed, 3 skipped" in res.stdout
    refused = [line for line in res.stdout.splitlines() if line.startswith("ci-skips: REFUSED")]
    assert sorted(refused) == [
        "ci-skips: REFUSED test_some.py::test_lost_its_runtime: the lab has no Pyxis: no Pyxis/enroot sources",
        "ci-skips: REFUSED test_some.py::test_under_xdist[2]: one command was slow",
    ]
    assert (
        "ci-skips: allowed test_some.py::test_gpu_only: needs NCCL (a GPU machine) (tests/ci_skips.toml: CI has no GPU)"
        in res.stdout
    )


def test_outside_ci_a_skip_is_printed_and_passes(tmp_path: Path) -> None:
    res = _pytest(tmp_path, "")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "would fail under CI=true" in res.stdout
    assert "ci-skips: REFUSED test_some.py::test_lost_its_runtime" in res.stdout


def test_the_repo_list_reads_and_every_entry_says_why(tmp_path: Path) -> None:
    assert all(rule.why and rule.reason and rule.test for rule in load(LIST))
    (tmp_path / "bad.toml").write_text('[[skip]]\ntest = "x"\nreason = "y"\n')
    with pytest.raises(pytest.UsageError, match="skip #1 lacks why"):
        load(tmp_path / "bad.toml")
