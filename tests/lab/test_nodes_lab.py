"""What every node of a job gets before Ray starts, whatever the submitting shell had."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.lab.helpers import EXPERIMENTS, SPEC

pytestmark = [pytest.mark.lab, pytest.mark.timeout(240)]


def test_open_files_soft_limit_is_raised_to_the_hard_limit_everywhere(lab: list[str]) -> None:
    """SLURM propagates the submitting shell's limits (PropagateResourceLimits=ALL): submitted
    with a soft limit of 1024, the driver and a task on every node still get the hard limit."""
    hard = subprocess.run(["bash", "-c", "ulimit -Hn"], capture_output=True, text=True).stdout.strip()
    submit = [sys.executable, "-m", "slurm_rl", "submit", SPEC, str(EXPERIMENTS / "limits_check.py")]
    submit += ["--nodes", "3", "--wait", "--json"]
    res = subprocess.run(
        ["bash", "-c", f"ulimit -Sn 1024 && exec {shlex.join(submit)}"],
        capture_output=True, text=True, timeout=180, cwd=REPO,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout.splitlines()[-1])
    log = (Path(data["job_dir"]) / "logs" / "driver.log").read_text()
    report = json.loads([line for line in log.splitlines() if line.startswith("{")][-1])
    assert int(hard) > 1024, "the machine's hard limit must exceed 1024 for this test to mean anything"
    assert report["driver"] == [int(hard), int(hard)], report
    assert sorted(report["workers"]) == ["node1", "node2", "node3"]
    assert all(lim == [int(hard), int(hard)] for lim in report["workers"].values()), report
    assert report["cluster_open_files"] == int(hard)
