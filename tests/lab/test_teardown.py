"""`slurm-rl teardown`: cancels, cleans each node, reports; idempotent; refuses bad ids."""

from __future__ import annotations

import json
import subprocess
import time

import pytest

from tests.conftest import CLI_USER, run_cli, user_argv
from tests.lab.helpers import SPEC, assert_no_leftovers, exit_reason, job_leftovers, start, wait_ready

pytestmark = [pytest.mark.lab, pytest.mark.lab_shared, pytest.mark.timeout(240)]


@pytest.mark.smoke  # on 22.05: teardown through the text readers is test_site_lab's enforced-account one
def test_teardown_running_job_then_again(lab: list[str]) -> None:
    data = start("hold.py", nodes=3)
    wait_ready(data)
    t0 = time.monotonic()
    res = run_cli("teardown", str(data["job_id"]), "--json", "--spec", SPEC)
    assert res.returncode == 0, res.stderr
    report = json.loads(res.stdout)
    assert report["cancelled"] and sorted(report["nodes"]) == ["node1", "node2", "node3"]
    assert {n["node"] for n in report["per_node"]} == {"node1", "node2", "node3"}
    assert not job_leftovers(lab, data["job_id"])  # zero processes when teardown returns
    assert time.monotonic() - t0 < 30
    assert "cancel" in exit_reason(data) or "SIGTERM" in exit_reason(data)
    again = run_cli("teardown", str(data["job_id"]), "--spec", SPEC)
    assert again.returncode == 0, again.stderr
    assert "was already" in again.stdout and "0 leftover" in again.stdout


@pytest.mark.smoke
def test_teardown_force_kills_at_once(lab: list[str]) -> None:
    data = start("hold.py", nodes=2)
    wait_ready(data)
    res = run_cli("teardown", str(data["job_id"]), "--force", "--json", "--spec", SPEC)
    assert res.returncode == 0, res.stderr
    report = json.loads(res.stdout)
    assert report["killed_total"] > 0  # it found and killed the job's processes itself
    assert_no_leftovers(lab, data["job_id"], within_s=2)


def test_teardown_never_started_job(lab: list[str]) -> None:
    data = start("exit_code.py", "0", nodes=1, extra=("--hold",))
    res = run_cli("teardown", str(data["job_id"]), "--spec", SPEC)
    assert res.returncode == 0, res.stderr
    assert "never started" in res.stdout
    state = subprocess.run(["scontrol", "show", "job", str(data["job_id"])], capture_output=True, text=True).stdout
    assert "JobState=CANCELLED" in state


def test_teardown_unknown_job_exit_2(lab: list[str]) -> None:
    res = run_cli("teardown", "999999999", "--spec", SPEC)
    assert res.returncode == 2
    assert "999999999" in res.stderr and len(res.stderr.strip().splitlines()) == 1


OTHER_USER = "srl-other"


@pytest.mark.parametrize("as_user", [None, OTHER_USER], ids=["own-non-slurm-rl-job", "other-users-job"])
def test_teardown_foreign_job_exit_2_and_untouched(lab: list[str], as_user: str | None) -> None:
    """A job not submitted by slurm-rl, or another user's: refused with exit 2, not cancelled."""
    by = as_user or CLI_USER["name"]  # the other user, or the one teardown runs as (this test's user)
    sbatch = ["sbatch", "--parsable", "-N", "1", "-o", "/dev/null", "--chdir", "/", "--wrap", "sleep 60"]
    job = subprocess.run(
        user_argv(by, sbatch) if by else sbatch,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    try:
        res = run_cli("teardown", job, "--spec", SPEC)
        assert res.returncode == 2 and job in res.stderr
        if as_user:
            assert as_user in res.stderr
        state = subprocess.run(["squeue", "-h", "-j", job, "-o", "%T"], capture_output=True, text=True).stdout
        assert state.strip() in ("PENDING", "RUNNING")
    finally:
        subprocess.run(["scancel", job], check=False)
