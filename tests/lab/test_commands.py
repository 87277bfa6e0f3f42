"""status, list, logs and attach on a live job."""

from __future__ import annotations

import json
import re

import pytest

from tests.conftest import REPO, run_cli
from tests.lab.helpers import (
    SPEC,
    assert_no_leftovers,
    job_cluster,
    job_dir,
    start,
    submit,
    tagged_json,
    wait_for,
    wait_gone,
    wait_ready,
)

pytestmark = [pytest.mark.lab, pytest.mark.lab_shared, pytest.mark.timeout(240)]


def test_commands_on_a_live_job(lab: list[str]) -> None:
    data = start("hold.py", nodes=2)
    jid = str(data["job_id"])
    try:
        wait_ready(data)
        nodes = job_cluster(data)["nodes"]  # whichever SLURM gave it
        st = run_cli("status", jid, "--json", "--spec", SPEC)
        row = json.loads(st.stdout)
        assert (
            row["state"] == "RUNNING" and row["phase"] in ("driver_start", "driver_connected") and row["nodes_up"] == 2
        )
        table = run_cli("status", "--spec", SPEC)
        assert jid in table.stdout and "RUNNING" in table.stdout
        assert jid in run_cli("list", "--spec", SPEC).stdout
        # attach runs inside the job, on the head node, connected to this job's Ray (token included)
        code = "import ray; ray.init(); print('NODES', len([n for n in ray.nodes() if n['Alive']]))"
        said: list[str] = []

        def sees_both_nodes() -> bool:  # a node is up once its `ray start` returned; Ray's own
            att = run_cli("attach", jid, "--spec", SPEC, "--", "python", "-c", code, timeout=120)
            said[:] = [att.stdout[-500:] + att.stderr[-2000:]]  # node table may say so a moment later
            assert att.returncode == 0, said[0]
            return "NODES 2" in att.stdout

        assert wait_for(sees_both_nodes, 60, poll_s=2), said[0]
        status = run_cli("attach", jid, "--spec", SPEC, "--", "ray", "status", timeout=120)  # the README's advice
        assert status.returncode == 0 and "No cluster status" not in status.stdout, status.stdout + status.stderr
        assert "Active:" in status.stdout and "slurm_managed_ray_cluster" in status.stdout, status.stdout
        no_client = run_cli("attach", jid, "--client", "--spec", SPEC, "--", "true")  # submitted without --ray-client
        assert no_client.returncode == 2 and "--ray-client" in no_client.stderr, no_client.stderr
        logs = run_cli("logs", jid, "--spec", SPEC)
        assert logs.returncode == 0 and "driver ready" in logs.stdout
        node_log = run_cli("logs", jid, "--node", nodes[1], "--spec", SPEC)
        assert "ray start" in node_log.stdout
    finally:
        (job_dir(data) / "release").touch()
    follow = run_cli("logs", jid, "-f", "--spec", SPEC, timeout=120)  # returns once the job has ended
    assert follow.returncode == 0 and "driver ready" in follow.stdout
    assert f"job {jid}: " in follow.stderr and "exit code 0" in follow.stderr  # ... and says how it ended
    wait_gone(data["job_id"])
    gone = run_cli("attach", jid, "--spec", SPEC, "--", "true")  # nothing to attach to any more
    assert gone.returncode == 2 and f"job {jid} has ended" in gone.stderr and "expired" not in gone.stderr
    missing = run_cli("logs", jid, "--node", "node9", "--spec", SPEC)
    assert missing.returncode == 2 and f"its nodes: {', '.join(sorted(nodes))}" in missing.stderr, missing.stderr


def test_wait_prints_the_driver_output_then_how_it_ended(lab: list[str]) -> None:
    res = run_cli("submit", SPEC, "examples/hello.py", "-N", "2", "--wait", cwd=REPO, timeout=180)
    assert res.returncode == 0, res.stderr[-2000:]
    hellos = set(re.findall(r"hello from (node\d+)", res.stderr))  # followed as it came
    assert len(hellos) == 2, res.stderr  # its two nodes, whichever SLURM gave it
    assert "COMPLETED, exit code 0: driver exited 0" in res.stderr


def test_a_pending_job_says_why_when_slurm_expects_it_and_how_many_go_first(lab: list[str]) -> None:
    data = start("hold.py", nodes=1, extra=("--sbatch-arg=--begin=now+1hour",))
    jid = str(data["job_id"])
    try:
        said = {"waits_for": ""}  # "SLURM's scheduler" until it has looked at the job (reason None)

        def reason_given() -> bool:
            said.update(json.loads(run_cli("status", jid, "--json").stdout))
            return said["waits_for"] not in ("", "SLURM's scheduler")

        wait_for(reason_given, 60, poll_s=1)
        assert said["waits_for"] == "its start time (--begin) (BeginTime)", said
        row = json.loads(run_cli("status", jid, "--json").stdout)
        assert row["state"] == "PENDING" and row["expected_start"] and row["partition"], row
        assert isinstance(row["jobs_ahead"], int) and row["jobs_ahead"] >= 0, row  # (the other stream's, if any)
        table = run_cli("status", jid).stdout
        assert f"job {jid}: pending, waiting for its start time (--begin) (BeginTime)" in table, table
        place = rf"job {jid}: starts ~(59 min|1 h 0 min) from now, at \d\d:\d\d \(SLURM's estimate\); \d+ jobs? ahead"
        assert re.search(place + rf" of it in partition {row['partition']}", table), table
    finally:
        assert run_cli("teardown", jid).returncode == 0
    wait_gone(data["job_id"])
    assert_no_leftovers(lab, data["job_id"])


def test_logs_of_unknown_job_exit_2(lab: list[str]) -> None:
    res = run_cli("logs", "999999998", "--spec", SPEC)
    assert res.returncode == 2
    assert "999999998" in res.stderr


def test_a_working_directory_the_nodes_lack_is_named_with_the_fix(lab: list[str], tmp_path) -> None:  # type: ignore[no-untyped-def]
    # pytest's tmp_path is under the submit host's /tmp, which no lab node shares
    res = run_cli("submit", SPEC, str(REPO / "examples" / "hello.py"), "-N", "1", "--wait", "--json", cwd=tmp_path,
                  timeout=180)  # fmt: skip
    data = json.loads(res.stdout.splitlines()[-1])
    assert res.returncode != 0 and data["state"] == "FAILED", res.stderr[-2000:]
    # on whichever node SLURM chose (with the lab's switch tree, a 1-node job goes to the lone leaf's node3)
    assert re.search(
        rf"the working directory {re.escape(str(tmp_path))} does not exist on node\d", data["exit_reason"]
    ), data
    assert "--workdir DIR" in data["exit_reason"]
    assert_no_leftovers(lab, data["job_id"])


def test_a_plain_ray_driver_sees_every_node_and_gets_the_state_api_with_dashboard(lab: list[str]) -> None:
    """A driver that never calls init_ray (plain ray.init(), as NeMo Gym's initialize_ray) starts
    once the nodes are up; --dashboard gives it Ray's state API; gym_env.yaml names the address."""
    res, data = submit("plain_ray.py", nodes=2, extra=("--dashboard",))
    log = (job_dir(data) / "logs" / "driver.log").read_text()
    assert res.returncode == 0, log[-3000:]
    report = tagged_json(log, "REPORT")
    assert report["nodes_at_connect"] == 2 and report["state_api_nodes"] == 2, report
    cluster = job_cluster(data)
    gym = (job_dir(data) / "gym_env.yaml").read_text()
    assert gym == f'ray_head_node_address: "{cluster["address"]}"\n'
    assert_no_leftovers(lab, data["job_id"])


def test_status_and_list_show_the_last_progress_not_the_workers_lines(lab: list[str]) -> None:
    """Issue 58's progress: a metrics step, then 8 s of a worker's lines that Ray forwards into
    the driver's log (not progress: status still names the step, now older), then a heartbeat."""
    import time as _time

    data = start("progress_check.py", nodes=1)
    jd = job_dir(data)

    def status() -> dict:
        return json.loads(run_cli("status", str(data["job_id"]), "--json", timeout=60).stdout)

    def reached(name: str) -> None:
        assert wait_for((jd / f"phase-{name}").exists, 120), f"the driver never reached {name}"

    try:
        reached("step")
        assert wait_for(lambda: (status()["progress"] or {}).get("what") == "step 3", 15, poll_s=0.5), status()
        (jd / "go-step").touch()
        reached("chatter")
        seen = status()["progress"]
        assert seen["what"] == "step 3" and _time.time() - seen["t"] >= 7, seen  # the worker's lines did not count
        assert "worker line" in (jd / "logs" / "driver.log").read_text()
        shown = run_cli("status", str(data["job_id"]), timeout=60).stdout
        assert f"job {data['job_id']}: last progress " in shown and "(step 3)" in shown, shown
        listed = run_cli("list", timeout=60).stdout
        row = next(line for line in listed.splitlines() if line.startswith(str(data["job_id"])))
        assert "progress" in listed.splitlines()[0] and re.search(r"RUNNING\s+\S+ \S+\s+\d+s", row), listed
        (jd / "go-chatter").touch()
        reached("heartbeat")
        assert status()["progress"]["what"] == "heartbeat: eval"
        (jd / "go-heartbeat").touch()
    finally:
        for name in ("step", "chatter", "heartbeat"):
            (jd / f"go-{name}").touch()
    wait_gone(data["job_id"])
    assert_no_leftovers(lab, data["job_id"])
