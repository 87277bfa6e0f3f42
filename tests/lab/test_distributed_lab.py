"""The driver API on a slurm-rl job: a worker group over the lab's 3 nodes, gloo all-reduce."""

from __future__ import annotations

import json

import pytest

from tests.lab.helpers import assert_no_leftovers, job_dir, submit

pytestmark = [pytest.mark.lab, pytest.mark.timeout(240)]


def test_worker_group_spans_nodes_and_allreduces(lab: list[str]) -> None:
    res, data = submit("allreduce.py", nodes=3)
    log = (job_dir(data) / "logs" / "driver.log").read_text()
    assert res.returncode == 0, log[-3000:]
    results = json.loads(next(line for line in log.splitlines() if line.startswith("REPORT "))[7:])
    assert [r["sum"] for r in results] == [6.0, 6.0, 6.0]
    assert sorted(r["node_rank"] for r in results) == [0, 1, 2]
    assert sorted(r["ip"] for r in results) == ["10.77.0.11", "10.77.0.12", "10.77.0.13"]
    assert "Worker Group: gloo (3 workers)" in log
    assert_no_leftovers(lab, data["job_id"])
