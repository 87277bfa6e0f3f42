"""Retries by cause (--retry-on, docs/causes.md) on the lab: a failure whose cause is not named
ends the job and says so, a named one is retried and the driver knows why (slurm_rl.attempt()),
a gloo collective that times out is named so, and a node failed mid-run is retried without that
node, the driver resuming from its checkpoint."""

from __future__ import annotations

import json
import subprocess
import time

import pytest

from slurm_rl.core.events import read_events
from tests.conftest import LAB, run_cli
from tests.lab.helpers import assert_no_leftovers, job_dir, last_json, start, submit, wait_for, wait_gone
from tests.lab.test_node_failure_lab import revive

pytestmark = [pytest.mark.lab, pytest.mark.timeout(420)]


def status_of(job_id: int) -> dict:
    return json.loads(run_cli("status", str(job_id), "--json", timeout=60).stdout.splitlines()[-1])


@pytest.mark.lab_shared
def test_a_driver_exception_under_retry_on_node_is_not_retried_and_says_so(lab: list[str]) -> None:
    res, data = submit("exit_code.py", "4", nodes=1, extra=("--requeue", "2", "--retry-on", "node,preempted"))
    assert res.returncode == 4, res.stderr
    status = status_of(data["job_id"])
    assert status["state"] == "FAILED" and status["cause"]["kind"] == "driver_error", status
    assert status["exit_reason"].endswith(
        "not retried: its cause (driver_error) is not one --retry-on node,preempted names"
    )
    assert data["cause"]["kind"] == "driver_error", data  # what --wait --json ends with
    events = [e["event"] for e in read_events(job_dir(data) / "events.jsonl")]
    assert "requeue" not in events and "not_retried" in events
    assert_no_leftovers(lab, data["job_id"])


@pytest.mark.lab_shared
@pytest.mark.lab_waits  # SLURM's requeue delay: first in the lab stream (tests/conftest.py)
def test_a_drivers_exit_code_it_names_is_retried_and_the_driver_knows_why(lab: list[str]) -> None:
    res, data = submit("attempts.py", nodes=1, extra=("--requeue", "1", "--retry-on", "exit:5"), timeout=240)
    assert res.returncode == 0, res.stderr
    said = last_json((job_dir(data) / "logs" / "driver.log").read_text(), "attempt")  # the inner object
    assert said["attempt"] == 1 and said["exit_code"] == 5 and not said["by_slurm"], said
    assert said["cause"]["kind"] == "driver_error", said
    assert status_of(data["job_id"])["cause"]["kind"] == "completed"


@pytest.mark.lab_shared
def test_a_gloo_collective_that_times_out_is_classified_as_such(lab: list[str]) -> None:
    res, data = submit("stall.py", "collective-timeout", nodes=2, timeout=240)
    assert res.returncode == 1, (res.stdout[-2000:], res.stderr[-2000:])
    status = status_of(data["job_id"])
    assert status["cause"]["kind"] == "collective_timeout", status
    assert "Timed out waiting" in (job_dir(data) / "logs" / "driver.log").read_text()


def test_a_node_failed_mid_run_is_retried_without_it_and_resumes_from_its_checkpoint(lab: list[str]) -> None:
    data = start("resume.py", nodes=2, extra=("--requeue", "1", "--retry-on", "node"))
    ready = job_dir(data) / "driver_ready"
    assert wait_for(lambda: ready.exists() and ready.read_text().endswith("\n"), 180), f"see {job_dir(data)}"
    hosts = ready.read_text().split()
    head = json.loads((job_dir(data) / "cluster.json").read_text())["head_node"]
    worker = next(h for h in hosts if h != head)
    t0 = time.monotonic()
    res = subprocess.run([str(LAB), "fail", worker], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    try:
        answer = job_dir(data) / "answer.json"
        assert wait_for(answer.exists, 300), f"no second attempt finished; see {job_dir(data)}"
        took = time.monotonic() - t0
        wait_gone(data["job_id"], 120)
        said = json.loads(answer.read_text())
        print(f"{worker} failed: the job ran again without it {took:.0f} s later ({said['hosts']})")
        assert said["resumed_from"] == 3 and worker not in said["hosts"] and len(said["hosts"]) == 2, said
        last = said["attempts"][-1]
        assert last["attempt"] == 1 and (last["cause"]["kind"], last["cause"]["node"]) == ("node_lost", worker), said
        status = status_of(data["job_id"])
        assert status["state"] == "COMPLETED" and status["cause"]["kind"] == "completed", status
        assert_no_leftovers([n for n in lab if n != worker], data["job_id"])
    finally:
        revive(worker)
