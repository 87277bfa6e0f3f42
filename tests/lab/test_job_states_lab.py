"""What a job says is what happened, on the lab: a wait ends on SLURM's final state even while a
slow epilog keeps the job COMPLETING after the driver's exit, and a sweep's array tasks are jobs
for every command (status, logs, attach, teardown of one task or of the whole array)."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator

import pytest

from slurm_rl.core.events import read_events
from tests.conftest import LAB, run_cli
from tests.lab.helpers import EXPERIMENTS, SPEC, assert_no_leftovers, job_dir, submit, wait_for, wait_gone, wait_ready

pytestmark = [pytest.mark.lab, pytest.mark.timeout(300)]
EPILOG_S = 6


@pytest.fixture
def slow_epilog(lab: list[str]) -> Iterator[list[str]]:
    """Every node's epilog sleeps EPILOG_S at each job's end: SLURM says COMPLETING that long
    after the batch script (and so the driver) ended, every time."""
    subprocess.run([str(LAB), "epilog-delay", str(EPILOG_S)], check=True, timeout=30)
    try:
        yield lab
    finally:
        subprocess.run([str(LAB), "epilog-delay", "0"], check=True, timeout=30)


@pytest.mark.smoke
@pytest.mark.smoke_versions
def test_a_wait_ends_on_slurms_final_state_never_on_the_exit_file(slow_epilog: list[str]) -> None:
    res, data = submit("exit_code.py", "3", nodes=2, timeout=180)
    returned = time.time()
    assert res.returncode == 3 and (data["state"], data["exit_code"]) == ("FAILED", 3), res.stderr
    [end] = [e for e in read_events(job_dir(data) / "events.jsonl") if e["event"] == "job_end"]
    assert returned - end["t"] >= EPILOG_S - 2, "the window did not open: the wait returned before the epilog ended"
    status = json.loads(run_cli("status", str(data["job_id"]), "--json").stdout.splitlines()[-1])
    assert (status["state"], status["exit_code"]) == ("FAILED", 3), status

    # the sweep's exit codes are its own matter: its tasks need no slow epilog (CI time)
    subprocess.run([str(LAB), "epilog-delay", "0"], check=True, timeout=30)
    res = run_cli(
        "sweep",
        SPEC,
        str(EXPERIMENTS / "sweep_point.py"),
        *("--nodes", "1", "--cpus-per-node", "1", "--wait", "--json"),
        *("--", "--lr", "0.1", "--seed", "0,1", "--fail-at", "0.1:1"),
        timeout=240,
    )
    tasks = json.loads(res.stdout.splitlines()[-1])["tasks"]
    assert res.returncode == 1 and [(t["state"], t["exit_code"]) for t in tasks] == [("COMPLETED", 0), ("FAILED", 3)]


@pytest.mark.lab_shared
def test_array_tasks_are_jobs_to_status_logs_attach_and_teardown(lab: list[str]) -> None:
    res = run_cli(
        "sweep",
        SPEC,
        str(EXPERIMENTS / "hold.py"),
        *("--nodes", "1", "--cpus-per-node", "1", "--json", "--", "--tag", "a,b,c"),
        timeout=60,
    )
    assert res.returncode == 0, res.stderr
    sweep = json.loads(res.stdout.splitlines()[-1])
    array_id = sweep["array_id"]
    tasks = {str(t["job_id"]): t for t in sweep["tasks"]}
    one, *others = sorted(tasks)
    hosts = {jid: wait_ready(t)[0][0] for jid, t in tasks.items()}  # each task's one node

    status = json.loads(run_cli("status", one, "--json").stdout.splitlines()[-1])
    assert status["job_id"] == one and status["state"] == "RUNNING" and status["nodes_up"] == 1, status
    logs = run_cli("logs", one)
    assert logs.returncode == 0 and "driver ready" in logs.stdout, logs.stderr
    att = run_cli("attach", one, "--", "hostname", timeout=120)
    assert att.returncode == 0 and att.stdout.strip() == hosts[one], (att.stdout, att.stderr)

    down = run_cli("teardown", one, "--json", timeout=120)  # one task: the others run on
    assert down.returncode == 0, down.stderr
    wait_gone(one)  # type: ignore[arg-type]
    assert_no_leftovers(lab, one)  # type: ignore[arg-type]  # the processes' marker is the task's id
    assert all(json.loads(run_cli("status", t, "--json").stdout)["state"] == "RUNNING" for t in others)

    down = run_cli("teardown", str(array_id), "--json", timeout=180)  # the array: every task
    assert down.returncode == 0, down.stderr
    for t in tasks:
        ended = lambda t=t: json.loads(run_cli("status", t, "--json").stdout)["state"] != "RUNNING"  # noqa: E731
        assert wait_for(ended, 60, poll_s=1)
        assert_no_leftovers(lab, t)  # type: ignore[arg-type]
