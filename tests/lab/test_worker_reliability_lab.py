"""Worker-group reliability across the 3-node lab (issue 9's "must show"): a worker killed on
node 2 mid-call is named within 10 s and restarted in place; past max_restarts the error says
so; a gloo group all-reduces again after a restart; a stuck call comes with its stack; a memory
hog is stopped with that cause while the others answer; a node that loses its Ray is named
within the health-check window."""

from __future__ import annotations

import json

import pytest

from slurm_rl.job.ray_start import NODE_LOST_WINDOW_S
from tests.conftest import REPO
from tests.lab.helpers import assert_no_leftovers, job_dir, submit

pytestmark = [pytest.mark.lab, pytest.mark.lab_shared, pytest.mark.timeout(420)]


def test_worker_failures_restarts_and_health_on_three_nodes(lab: list[str]) -> None:
    res, data = submit("reliability.py", str(REPO), nodes=3, timeout=400)
    log = (job_dir(data) / "logs" / "driver.log").read_text()
    assert res.returncode == 0, (res.stderr[-2000:], log[-4000:])
    out = json.loads((job_dir(data) / "reliability.json").read_text())

    seconds, message, indices, victim = out["killed_mid_call"]
    assert 0 <= seconds < 10 and indices == [victim], out["killed_mid_call"]
    assert f"worker {victim}" in message and "node2" in message
    assert out["restarted"] == [victim]
    assert out["same_call_after_restart"] == [0, 1, 2]
    assert "node2" in out["killed_again"][0]
    assert "already restarted max_restarts=1 times" in out["past_max_restarts"]

    [stuck] = out["stuck"]
    assert stuck["worker"] == 2 or stuck["current_call"] == "sleep"
    assert stuck["running_s"] >= 2.0 and "ProbeWorker.sleep" in stuck["stack"]
    assert "worker status" in log and "resource usage" in log  # the rich tables, in the driver log

    assert out["gloo"] == [[3.0, 3.0, 3.0], [6.0, 6.0, 6.0]]

    seconds, message, indices, others = out["memory"]
    assert seconds >= 0 and "memory limit" in message and "node2" in message and others == [None, None]

    seconds, message, indices, victim = out["node_lost"]
    assert 0 <= seconds <= NODE_LOST_WINDOW_S, out["node_lost"]
    assert victim in message and "node lost" in message and "node has died" in message, message
    restarted, answers, nodes = out["restarted_elsewhere"]
    assert restarted == indices and answers == [0, 1, 2] and victim not in nodes, out["restarted_elsewhere"]
    assert_no_leftovers(lab, data["job_id"])
