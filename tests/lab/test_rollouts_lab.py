"""slurm_rl.rollouts on the 3-node lab: verification tasks land on every node, come back in
input order, a hung item times out instead of hanging the run; the rollout pool writes one
record per prompt and a second run redoes none."""

from __future__ import annotations

import json

import pytest

from tests.lab.helpers import assert_no_leftovers, job_dir, submit

pytestmark = [pytest.mark.lab, pytest.mark.lab_shared, pytest.mark.timeout(300)]


def test_verification_spreads_over_all_nodes_and_rollouts_resume(lab: list[str]) -> None:
    res, data = submit("rollouts_check.py", nodes=3, timeout=280)
    assert res.returncode == 0, (res.stderr[-2000:], (job_dir(data) / "logs" / "driver.log").read_text()[-3000:])
    out = json.loads((job_dir(data) / "rollouts_check.json").read_text())
    assert out["hosts"] == ["node1", "node2", "node3"]
    assert out["in_order"] and out["failed"] == [[7, "timed out after 1 s"]]
    assert out["rollouts_new"] == [40, 0] and out["rollout_lines"] == 40
    assert out["rollout_hosts"] == ["node1", "node2", "node3"]
    assert_no_leftovers(lab, data["job_id"])
