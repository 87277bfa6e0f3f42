"""status, list, logs and attach on a live job."""

from __future__ import annotations

import json

import pytest

from tests.conftest import run_cli
from tests.lab.helpers import SPEC, job_dir, start, wait_gone, wait_ready

pytestmark = [pytest.mark.lab, pytest.mark.timeout(240)]


def test_commands_on_a_live_job(lab: list[str]) -> None:
    data = start("hold.py", nodes=2)
    jid = str(data["job_id"])
    try:
        wait_ready(data)
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
        att = run_cli("attach", jid, "--spec", SPEC, "--", "python", "-c", code, timeout=120)
        assert att.returncode == 0, att.stderr[-2000:]
        assert "NODES 2" in att.stdout
        logs = run_cli("logs", jid, "--spec", SPEC)
        assert logs.returncode == 0 and "driver ready" in logs.stdout
        node_log = run_cli("logs", jid, "--node", "node2", "--spec", SPEC)
        assert "ray start" in node_log.stdout
    finally:
        (job_dir(data) / "release").touch()
    follow = run_cli("logs", jid, "-f", "--spec", SPEC, timeout=120)  # returns once the job has ended
    assert follow.returncode == 0 and "driver ready" in follow.stdout
    wait_gone(data["job_id"])


def test_logs_of_unknown_job_exit_2(lab: list[str]) -> None:
    res = run_cli("logs", "999999998", "--spec", SPEC)
    assert res.returncode == 2
    assert "999999998" in res.stderr
