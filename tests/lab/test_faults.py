"""The fault matrix: whatever ends a job, within 10 s of it leaving the queue nothing of it is
left on any node, the job dir holds the logs and an exit_reason, and other jobs go on."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from slurm_rl.core.events import read_events
from tests.conftest import LAB, run_cli
from tests.lab.helpers import (
    assert_no_leftovers,
    exit_reason,
    in_queue,
    job_cluster,
    job_dir,
    lab_spec,
    start,
    submit,
    wait_for,
    wait_gone,
    wait_ready,
)

pytestmark = [pytest.mark.lab, pytest.mark.timeout(300)]
SLOW_AGENT = Path(__file__).parent / "faults" / "slow_agent"


def _release(data: dict) -> None:
    (job_dir(data) / "release").touch()


@pytest.mark.lab_shared
@pytest.mark.smoke
def test_driver_exception(lab: list[str]) -> None:
    data = start("hold.py", "raise", nodes=2)
    wait_ready(data)
    _release(data)
    wait_gone(data["job_id"])
    assert_no_leftovers(lab, data["job_id"])
    assert exit_reason(data) == "driver exited 1"
    assert "the experiment failed on purpose" in (job_dir(data) / "logs" / "driver.log").read_text()


@pytest.mark.smoke
def test_driver_sigkill(lab: list[str]) -> None:
    data = start("hold.py", nodes=2)
    wait_ready(data)
    exp = str(job_dir(data) / "experiment.py")
    head = job_cluster(data)["head_node"]  # the driver's node, whichever SLURM gave the job
    subprocess.run([str(LAB), "exec", head, "--", "pkill", "-KILL", "-f", exp], check=True, timeout=10)
    wait_gone(data["job_id"])
    assert_no_leftovers(lab, data["job_id"])
    assert "SIGKILL" in exit_reason(data)
    assert (job_dir(data) / "exit_code").read_text().strip() == "137"


@pytest.mark.smoke
def test_scancel_one_of_two_jobs_sharing_nodes(lab: list[str]) -> None:
    a = start("hold.py", nodes=2, extra=("--oversubscribe", "--name", "fault-a"))
    b = start("hold.py", nodes=2, extra=("--oversubscribe", "--name", "fault-b"))
    wait_ready(a)
    wait_ready(b)
    subprocess.run(["scancel", str(a["job_id"])], check=True, timeout=10)
    wait_gone(a["job_id"], 60)
    assert_no_leftovers(lab, a["job_id"])
    assert "SIGTERM" in exit_reason(a)
    assert (job_dir(a) / "logs" / "driver.log").exists()
    # the other job was not touched: still running, its actors still answer, and it finishes
    assert in_queue(b["job_id"])
    _release(b)
    wait_gone(b["job_id"])
    assert exit_reason(b) == "driver exited 0"
    assert_no_leftovers(lab, b["job_id"])


@pytest.mark.lab_shared
@pytest.mark.lab_waits  # SLURM's clocks: first in the lab stream (tests/conftest.py)
def test_time_limit(lab: list[str]) -> None:
    """The time limit, with a grown member in the job (`slurm-rl grow`: its --time is what the
    job has left): both leave the queue, nothing of either stays on any node."""
    data = start("hold.py", nodes=2, extra=("--time", "0:30"))
    wait_ready(data)
    grown = run_cli("grow", str(data["job_id"]), "--nodes", "1", "--no-wait", timeout=60)
    assert grown.returncode == 0, grown.stderr
    member = int((job_dir(data) / "members" / "1.job").read_text())
    joined = lambda: any(e["event"] == "member_joined" for e in read_events(job_dir(data) / "events.jsonl"))  # noqa: E731
    assert wait_for(joined, 20), f"the member never joined: {job_dir(data) / 'logs' / 'member-1.log'}"
    wait_gone(data["job_id"], 150)
    state = subprocess.run(["scontrol", "show", "job", str(data["job_id"])], capture_output=True, text=True).stdout
    assert "JobState=TIMEOUT" in state
    wait_gone(member, 60)
    assert_no_leftovers(lab, data["job_id"])
    assert "SIGTERM" in exit_reason(data)  # what the nodes saw ...
    status = run_cli("status", str(data["job_id"]), "--json")  # ... and what the user is told
    said = "hit the time limit (1 min: SLURM rounds --time 0:30 up to whole minutes)"
    assert json.loads(status.stdout)["exit_reason"] == said, status.stdout


@pytest.mark.lab_shared
def test_ray_actor_killed(lab: list[str]) -> None:
    data = start("hold.py", "actor-died", nodes=3)
    actors = wait_ready(data)
    host, pid = next((h, p) for h, p in actors if h == "node2")
    subprocess.run([str(LAB), "exec", host, "--", "kill", "-9", str(pid)], check=True, timeout=10)
    wait_gone(data["job_id"])
    assert exit_reason(data) == "driver exited 0"  # the driver saw the actor die and ended
    assert "an actor died" in (job_dir(data) / "logs" / "driver.log").read_text()
    assert_no_leftovers(lab, data["job_id"])


@pytest.mark.lab_shared
@pytest.mark.lab_waits  # SLURM's clocks: first in the lab stream (tests/conftest.py)
def test_a_node_whose_raylet_gave_up_on_its_agents_starts_ray_again_and_others_join_only_a_head_that_is_up(
    lab: list[str], tmp_path: Path
) -> None:
    """Under load the dashboard agent can start later than the raylet's fixed 15 s wait for it
    (busy CI runs lost a one-node array task and a 2-node container job so): that node stops what
    its `ray start` left and starts again, the head as well as a worker node. The other nodes join
    a head only once its `ray start` has returned, so the head's second start replaces a GCS that
    no node had joined; they join the second one, and the job runs. Here the first agent of both
    nodes is 20 s late (one job for both paths: each is a Ray start on the lab's two cores)."""
    spec = lab_spec(tmp_path, env={"PYTHONPATH": str(SLOW_AGENT), "SLOW_AGENT_RANKS": "0,1"})
    res, data = submit("check_cluster.py", "2", nodes=2, spec=spec, timeout=240)
    assert res.returncode == 0, exit_reason(data) if data else res.stderr
    cluster = job_cluster(data)  # whichever two nodes SLURM gave it
    head, worker = cluster["head_node"], next(n for n in cluster["nodes"] if n != cluster["head_node"])
    for node in (head, worker):
        log = (job_dir(data) / "logs" / f"node-{node}.log").read_text()
        assert "Timed out waiting for file" in log and "starting Ray once more" in log, (node, log[-2000:])
    events = read_events(job_dir(data) / "events.jsonl")
    retried = {e["node"]: e["t"] for e in events if e["event"] == "ray_start_retried"}
    assert sorted(retried) == sorted([head, worker]), events
    up = {e["node"]: e["t"] for e in events if e["event"] == "node_up"}
    # the worker joined the head's second GCS only: its own first start began after the head was up
    assert retried[head] < up[head] < retried[worker] < up[worker], events
    assert_no_leftovers(lab, data["job_id"])
