"""--requeue (a fresh Ray cluster per attempt, one job dir), --signal / on_preempt, and a
worker node whose slurmd dies mid-job."""

from __future__ import annotations

import json
import subprocess

import pytest

from slurm_rl.core.events import read_events
from tests.conftest import LAB, run_cli
from tests.lab.helpers import (
    assert_no_leftovers,
    exit_reason,
    job_dir,
    start,
    submit,
    wait_gone,
    wait_ready,
)
from tests.lab.test_node_failure_lab import revive

pytestmark = [pytest.mark.lab, pytest.mark.timeout(300)]


@pytest.mark.lab_shared
@pytest.mark.lab_waits  # SLURM's clocks: first in the lab stream (tests/conftest.py)
def test_requeue_after_failure(lab: list[str]) -> None:
    res, data = submit("flaky.py", nodes=2, extra=("--requeue", "1"), timeout=240)
    assert res.returncode == 0, (res.stdout, res.stderr)
    events = read_events(job_dir(data) / "events.jsonl")
    requeues = [e for e in events if e["event"] == "requeue"]
    assert len(requeues) == 1 and requeues[0]["exit_code"] == 5 and requeues[0]["attempt"] == 0
    # each attempt brought up its own Ray head, logged into the same job dir (the driver starts
    # with the head, so a driver that exits at once may end an attempt before the others join)
    heads = [e for e in events if e["event"] == "node_up" and e.get("rank") == 0]
    assert [e["attempt"] for e in heads] == [0, 1]
    assert "attempt 0" in (job_dir(data) / "logs" / "driver.log").read_text()
    assert_no_leftovers(lab, data["job_id"])


@pytest.mark.lab_shared
def test_no_requeue_beyond_the_limit(lab: list[str]) -> None:
    res, data = submit("exit_code.py", "4", nodes=1, extra=("--requeue", "0"))
    assert res.returncode == 4
    assert not [e for e in read_events(job_dir(data) / "events.jsonl") if e["event"] == "requeue"]


@pytest.mark.lab_shared
@pytest.mark.lab_waits  # SLURM's clocks: first in the lab stream (tests/conftest.py)
def test_warning_signal_reaches_the_driver(lab: list[str]) -> None:
    # SLURM sends the signal up to 60 s early; with 2:00 and @100 it comes 0-40 s after start
    res, data = submit("preempt.py", nodes=2, extra=("--time", "2:00", "--signal", "B:USR2@100"), timeout=200)
    assert res.returncode == 0, (res.stdout, res.stderr)
    assert (job_dir(data) / "checkpoint").exists()
    events = read_events(job_dir(data) / "events.jsonl")
    assert any(e["event"] == "preempt_signal" and e["hooked"] for e in events)
    assert_no_leftovers(lab, data["job_id"])


def test_worker_node_slurmd_killed(lab: list[str]) -> None:
    data = start("hold.py", nodes=3)
    wait_ready(data)
    try:
        subprocess.run([str(LAB), "exec", "node3", "--", "pkill", "-x", "slurmd"], check=True, timeout=10)
        # SLURM declares node3 dead after SlurmdTimeout and ends the job; node3's bootstrap, cut
        # off from SLURM, must notice its head is gone and stop its Ray by itself
        wait_gone(data["job_id"], 150)
        assert_no_leftovers(lab, data["job_id"])
        said = json.loads(run_cli("status", str(data["job_id"]), "--json").stdout.splitlines()[-1])
        # what SLURM made of it, in the reason users read (not only some reason: the node failure)
        assert said["state"] == "FAILED" and "(SLURM: NODE_FAIL" in said["exit_reason"], said
        assert said["cause"]["kind"] == "node_lost", said  # SLURM's stop was the node's loss, not a cancel
        assert exit_reason(data), "the head wrote how the job ended"
    finally:
        # slurmd back on node3: the node restarted as a failed one is (`fail` then `revive`, seconds;
        # a whole `up` took ~25 s), the rest of the lab untouched
        subprocess.run([str(LAB), "fail", "node3"], check=True, timeout=60, capture_output=True)
        revive("node3")


def _scontrol_end(job_id: int) -> float:
    from slurm_rl.core.end_time import parse_end_time

    out = subprocess.run(["scontrol", "show", "job", "-o", str(job_id)], capture_output=True, text=True, timeout=30)
    return parse_end_time(out.stdout)


@pytest.mark.lab_shared
@pytest.mark.lab_waits  # SLURM's clocks: first in the lab stream (tests/conftest.py)
def test_time_left_follows_slurms_end_time_also_after_the_limit_changes(lab: list[str]) -> None:
    """The driver's slurm_rl.time_left() (and `status`) agree with `scontrol show job`'s end time
    within 5 s, and follow `scontrol update TimeLimit` while the job runs."""
    import json
    import time

    from tests.lab.helpers import wait_for

    data = start("time_left.py", nodes=1, extra=("--time", "10"))
    report = job_dir(data) / "time_left.json"

    def agrees() -> bool:
        if not report.exists():
            return False
        seen = json.loads(report.read_text())
        return seen["left"] is not None and abs(seen["now"] + seen["left"] - _scontrol_end(data["job_id"])) <= 5

    try:
        seen = report.read_text() if report.exists() else "no report"
        assert wait_for(agrees, 90), (seen, _scontrol_end(data["job_id"]))
        status = json.loads(run_cli("status", str(data["job_id"]), "--json", timeout=60).stdout)
        assert abs(time.time() + status["time_left_s"] - _scontrol_end(data["job_id"])) <= 5, status
        shown = run_cli("status", str(data["job_id"]), timeout=60).stdout
        assert f"job {data['job_id']}: 9 min" in shown and "left (SLURM ends it at" in shown, shown
        before = _scontrol_end(data["job_id"])
        subprocess.run(["scontrol", "update", f"JobId={data['job_id']}", "TimeLimit=20"], check=True, timeout=30)
        assert _scontrol_end(data["job_id"]) - before >= 590
        assert wait_for(agrees, 40), (report.read_text(), _scontrol_end(data["job_id"]))  # refreshed within 15 s
        assert json.loads(report.read_text())["left"] > 18 * 60
    finally:
        (job_dir(data) / "release").touch()
    wait_gone(data["job_id"])
    assert_no_leftovers(lab, data["job_id"])
