"""NeMo RL-style workers on the 3-node lab: @ray.remote classes with and without their own
options, one in an isolated environment, and no launcher variable in any worker, on the last
node included (NeMo RL issue 309)."""

from __future__ import annotations

import json

import pytest

from tests.conftest import REPO
from tests.lab.helpers import assert_no_leftovers, job_dir, submit

pytestmark = [pytest.mark.lab, pytest.mark.lab_shared, pytest.mark.timeout(420)]  # 46 s idle, 182 s busy


def test_nemo_rl_style_workers_on_three_nodes(lab: list[str]) -> None:
    res, data = submit("nemo_compat.py", str(REPO), nodes=3, timeout=400)
    assert res.returncode == 0, (res.stderr[-2000:], (job_dir(data) / "logs" / "driver.log").read_text()[-3000:])
    out = json.loads((job_dir(data) / "nemo_compat.json").read_text())
    ranks, nodes = out["decorated"]
    assert ranks == ["0", "1", "2"] and sorted(nodes) == ["node1", "node2", "node3"]  # one per node
    assert nodes[0] == "node1"  # rank 0 on the head, where the driver runs
    assert out["decorated_options"] == [["yes"] * 3, ["configure-runtime-env"] * 3, ["from-configure"] * 3]
    for env in ("system_env", "isolated_env"):  # every node, the job's last node (node3) included
        hosts, launcher_vars = out[env]
        assert sorted(hosts) == ["node1", "node2", "node3"] and launcher_vars == [[], [], []], (env, out[env])
    assert out["isolated_decorated"] == [["0", "1", "2"], ["1", "1", "1"]]
    # NeMo RL 2026's per-node initializer: on each node of the group, in the isolated Python
    inits, (worker_hosts, _) = out["isolated_initializers"], out["isolated_env"]  # one worker per node
    assert sorted(inits) == ["0", "1", "2"] and [inits[str(n)] for n in range(3)] == [[h, "1"] for h in worker_hosts]
    assert out["isolated_pool_after_shutdown"] == 0
    assert_no_leftovers(lab, data["job_id"])
