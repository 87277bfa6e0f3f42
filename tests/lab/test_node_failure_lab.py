"""A node that fails as real ones do (`slurm-lab fail NODE`: every process on it dies at once, its
slurmd too): today's contract is fail-fast. A lost worker ends the job, and `status` names the
node; a lost head (where the batch script runs too) ends it as SLURM's NODE_FAIL. The surviving
nodes keep nothing either way. The seconds from the failure to the job's end are printed (the
healing issue measures against them). The node is revived after each test."""

from __future__ import annotations

import json
import subprocess
import time

import pytest

from tests.conftest import LAB, run_cli
from tests.lab.helpers import assert_no_leftovers, start, wait_for, wait_gone, wait_ready

pytestmark = [pytest.mark.lab, pytest.mark.timeout(300)]


def revive(node: str) -> None:
    res = subprocess.run([str(LAB), "revive", node], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr

    def serving() -> bool:
        state = subprocess.run(["sinfo", "-h", "-n", node, "-o", "%t"], capture_output=True, text=True, timeout=10)
        return state.stdout.strip() in ("idle", "mix", "alloc")

    assert wait_for(serving, 90), f"{node} did not come back into service"


def fail_and_wait(job: dict, node: str) -> tuple[dict, float]:
    """Fail ``node`` under the running job; (its status once it left the queue, seconds it took)."""
    t0 = time.monotonic()
    res = subprocess.run([str(LAB), "fail", node], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    wait_gone(job["job_id"], 180)
    took = time.monotonic() - t0
    res = run_cli("status", str(job["job_id"]), "--json", timeout=60)
    return json.loads(res.stdout.splitlines()[-1]), took


def test_a_failed_worker_node_ends_the_job_naming_it(lab: list[str]) -> None:
    job = start("hold.py", "ok", nodes=3)
    hosts = [h for h, _ in wait_ready(job, timeout_s=120)]
    worker = sorted(hosts)[-1]
    try:
        status, took = fail_and_wait(job, worker)
        print(f"worker {worker} failed: the job ended {took:.1f} s later ({status['state']})")
        assert status["state"] in ("FAILED", "NODE_FAIL"), status
        assert worker in json.dumps(status), status  # which node was lost is said
        assert_no_leftovers([n for n in lab if n != worker], job["job_id"])
    finally:
        revive(worker)


def test_a_failed_head_node_ends_the_job(lab: list[str]) -> None:
    job = start("hold.py", "ok", nodes=3)
    wait_ready(job, timeout_s=120)
    head = "node1"  # the allocation's first node: the batch script and the Ray head
    try:
        status, took = fail_and_wait(job, head)
        print(f"head {head} failed: the job ended {took:.1f} s later ({status['state']})")
        assert status["state"] in ("FAILED", "NODE_FAIL"), status
        assert_no_leftovers([n for n in lab if n != head], job["job_id"])
    finally:
        revive(head)
