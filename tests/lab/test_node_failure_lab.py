"""A node that fails as real ones do (`slurm-lab fail NODE`: every process on it dies at once, its
slurmd too). A lost head (where the batch script runs too) ends the job as SLURM's NODE_FAIL,
even a job that heals lost workers; the surviving nodes keep nothing. The seconds from the
failure to the job's end are printed. The node is revived after the test."""

from __future__ import annotations

import json
import subprocess
import time

import pytest

from tests.conftest import LAB, run_cli
from tests.lab.helpers import assert_no_leftovers, job_cluster, job_dir, start, wait_for, wait_gone, wait_ready

pytestmark = [pytest.mark.lab, pytest.mark.timeout(300)]


def revive(node: str) -> None:
    res = subprocess.run([str(LAB), "revive", node], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    wait_serving(node, 90)


def wait_serving(node: str, timeout_s: float) -> None:
    def serving() -> bool:
        state = subprocess.run(["sinfo", "-h", "-n", node, "-o", "%t"], capture_output=True, text=True, timeout=10)
        return state.stdout.strip() in ("idle", "mix", "alloc")

    assert wait_for(serving, timeout_s), f"{node} did not come back into service"


def fail_and_wait(job: dict, node: str) -> tuple[dict, float]:
    """Fail ``node`` under the running job; (its status once it left the queue, seconds it took)."""
    t0 = time.monotonic()
    res = subprocess.run([str(LAB), "fail", node], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    wait_gone(job["job_id"], 180)
    took = time.monotonic() - t0
    res = run_cli("status", str(job["job_id"]), "--json", timeout=60)
    return json.loads(res.stdout.splitlines()[-1]), took


def test_a_failed_head_node_ends_the_job_even_one_that_heals(lab: list[str]) -> None:
    """The head (the batch script, the Ray head, the driver) cannot be replaced: a job with
    --heal ends as any other, named as lost, and its worker nodes keep nothing. (A lost worker
    without --heal is test_cgroup_lab's; with it, test_self_healing_lab's.)"""
    job = start("hold.py", "ok", nodes=3, extra=("--heal", "1"))
    wait_ready(job, timeout_s=120)
    head = job_cluster(job)["head_node"]
    try:
        status, took = fail_and_wait(job, head)
        print(f"head {head} failed: the job ended {took:.1f} s later ({status['state']})")
        # SLURM keeps a --no-kill job running without its batch host: a surviving node cancels it
        assert status["state"] in ("FAILED", "NODE_FAIL", "CANCELLED"), status
        assert f"the head node {head} was lost" in status["exit_reason"], status
        assert (status["cause"]["kind"], status["cause"]["node"]) == ("node_lost", head), status
        assert not (job_dir(job) / "members" / "1.request").exists()  # no replacement asked for
        assert_no_leftovers([n for n in lab if n != head], job["job_id"])
    finally:
        revive(head)


def test_a_step_srun_cannot_start_on_one_node_leaves_nothing_on_the_others(lab: list[str]) -> None:
    """Found by the soak (seed 41): SLURM gives a job a node whose slurmd no longer answers (it has
    not noticed yet); srun cannot start the step there and SIGKILLs the tasks it started on the
    other nodes, before their bootstraps clean up. The batch script then runs the job's cleanup on
    those nodes, and the job names the node. (A stopped slurmd: srun's launch there times out
    after MessageTimeout, 10 s, while the other nodes' bootstraps are well under way.)"""
    node, others = lab[-1], lab[:-1]
    stop = subprocess.run([str(LAB), "exec", node, "--", "pkill", "-STOP", "-x", "slurmd"], timeout=30)
    assert stop.returncode == 0
    try:
        job = start("hold.py", "ok", nodes=3)
        wait_gone(job["job_id"], 120)
    finally:
        subprocess.run([str(LAB), "exec", node, "--", "pkill", "-CONT", "-x", "slurmd"], timeout=30)
        subprocess.run(["scontrol", "update", f"NodeName={node}", "State=RESUME"], capture_output=True, timeout=30)
    status = json.loads(run_cli("status", str(job["job_id"]), "--json", timeout=60).stdout.splitlines()[-1])
    assert status["exit_reason"].startswith(f"the job step could not start on {node} (srun: "), status
    assert status["cause"] == {**status["cause"], "kind": "launch_failure", "node": node}, status
    events = [json.loads(line) for line in (job_dir(job) / "events.jsonl").read_text().splitlines()]
    cleanup = [e for e in events if e["event"] == "step_cleanup"]
    assert len(cleanup) == 1 and cleanup[0]["skipped"] == node, cleanup
    assert sorted(r["node"] for r in cleanup[0]["reports"]) == others, cleanup
    assert any(r["temp_dir_removed"] for r in cleanup[0]["reports"]), cleanup  # what srun's SIGKILL left
    assert_no_leftovers(lab, job["job_id"], within_s=0)
    wait_serving(node, 60)
