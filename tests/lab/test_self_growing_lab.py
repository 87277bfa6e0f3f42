"""Growing a running job (`slurm-rl grow`, `shrink`) on a 4-node lab: a 1-node job's driver
listens for members and pins a Ray task on each node that joins. A member grown from the lab's
preemptible partition joins, gets work, then SLURM preempts it for a higher-tier job: it leaves,
the job goes on. A second member is shrunk: drained, cancelled, the job goes on. A third is
still in the job when the driver fails (an exception): it leaves the queue with the job, and
nothing of the job or of any member stays on any node. (The driver's normal end with a member:
test_self_healing_lab's container test; the time limit: test_faults.) (File order: after test_segment_lab, before
test_self_healing_lab, so the three share one switch to 4 nodes.)"""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.conftest import REPO, run_cli
from tests.lab.helpers import assert_no_leftovers, in_queue, job_cluster, job_dir, start, wait_for, wait_gone

pytestmark = [pytest.mark.lab, pytest.mark.four_nodes, pytest.mark.timeout(600)]


def grow(job_id: int, *extra: str) -> tuple[int, str]:
    """`slurm-rl grow JOB --nodes 1 ...` (waits for the join); (member number, its node)."""
    res = run_cli("grow", str(job_id), "--nodes", "1", "--timeout", "120", *extra, timeout=180)
    assert res.returncode == 0, (res.stdout, res.stderr)
    joined = [line for line in res.stdout.splitlines() if " joined on " in line]
    assert joined, res.stdout
    words = joined[-1].split()
    return int(words[words.index("member") + 1]), words[words.index("on") + 1]


def test_grown_members_join_get_work_and_leave_by_preemption_shrink_and_the_jobs_end(lab4: list[str]) -> None:
    job = start("grow_work.py", str(REPO), nodes=1)
    jid, jdir = job["job_id"], job_dir(job)
    assert wait_for((jdir / "driver_ready").exists, 150), f"the driver never got ready: {jdir / 'logs'}"
    state = jdir / "grow.json"

    def seen() -> dict:
        return json.loads(state.read_text()) if state.exists() else {"changes": [], "worked": {}, "members": []}

    def member_job(n: int) -> int:
        return int((jdir / "members" / f"{n}.job").read_text())

    try:
        # a member from the preemptible partition joins and gets the driver's work
        first, spot_node = grow(jid, "--partition", "labspot")
        ours = job_cluster(job)["nodes"]
        assert first == 1 and spot_node in lab4 and spot_node not in ours, (spot_node, ours)
        assert wait_for(lambda: seen()["worked"].get(spot_node) == spot_node, 60), seen()
        assert (
            subprocess.run(
                ["squeue", "-h", "-j", str(member_job(1)), "-o", "%P"], capture_output=True, text=True, timeout=10
            ).stdout.strip()
            == "labspot"
        )

        # SLURM preempts it for a higher-tier job: the member leaves, the job goes on
        argv = ["sbatch", "--parsable", "-p", "laburgent", "--exclusive", "-w", spot_node, "-o", "/dev/null"]
        urgent = subprocess.run([*argv, "--wrap", "sleep 2"], capture_output=True, text=True, timeout=30, check=True)
        assert wait_for(lambda: not in_queue(member_job(1)), 60), "the urgent job did not preempt the member"
        shown = subprocess.run(
            ["scontrol", "show", "job", str(member_job(1))], capture_output=True, text=True, timeout=10
        ).stdout
        assert "JobState=PREEMPTED" in shown, shown
        left = lambda n: [c for c in seen()["changes"] if c["event"] == "member_left" and c["member"] == n]  # noqa: E731
        assert wait_for(lambda: left(1), 60), seen()
        assert in_queue(jid), "the job ended with its preempted member"
        wait_gone(int(urgent.stdout.strip().split(";")[0]), 60)

        # a second member, released by shrink: drained, cancelled, the job goes on
        second, shrunk_node = grow(jid)
        assert second == 2 and shrunk_node != spot_node
        assert wait_for(lambda: shrunk_node in seen()["worked"], 60), seen()
        res = run_cli("shrink", str(jid), "--member", "2", timeout=120)
        assert res.returncode == 0 and "drained" in res.stdout and "left" in res.stdout, (res.stdout, res.stderr)
        assert wait_for(lambda: left(2), 60) and left(2)[0]["why"] == "shrunk", seen()
        assert in_queue(jid) and not in_queue(member_job(2))

        # a third stays until the job ends
        third, last_node = grow(jid)
        assert third == 3 and last_node not in (spot_node, shrunk_node)
        status = json.loads(run_cli("status", str(jid), "--json", timeout=60).stdout.splitlines()[-1])
        assert status["state"] == "RUNNING" and status["nodes"] == 2 and status["nodes_up"] == 2, status
        assert [(m["member"], m["kind"], m["state"]) for m in status["members"]] == [
            (1, "grow", "left"),
            (2, "grow", "left"),
            (3, "grow", "joined"),
        ], status["members"]
        # what the driver heard (on_member_change) and sees (members()), in order
        assert wait_for(lambda: [m["nodes"] for m in seen()["members"]] == [[], [], [last_node]], 10), seen()
        assert seen()["nodes"] == [*ours, last_node], seen()
        assert wait_for(lambda: last_node in seen()["worked"], 60), seen()
        heard = [(c["event"], c["member"]) for c in seen()["changes"]]
        assert heard == [
            ("member_joined", 1),
            ("member_left", 1),
            ("member_joined", 2),
            ("member_left", 2),
            ("member_joined", 3),
        ], heard

        (jdir / "release").write_text("raise\n")
        wait_gone(jid, 120)
        status = json.loads(run_cli("status", str(jid), "--json", timeout=60).stdout.splitlines()[-1])
        assert status["state"] == "FAILED" and status["exit_code"] == 1, status
        assert wait_for(lambda: not in_queue(member_job(3)), 30), "the member outlived its job"
        assert_no_leftovers(lab4, jid, within_s=30)
    finally:
        if in_queue(jid):
            run_cli("teardown", str(jid), timeout=180)
