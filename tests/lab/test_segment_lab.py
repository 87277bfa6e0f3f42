"""--segment by SLURM version: on 23.11+ with topology/block (the lab's newer SLURMs with an even
node count: blocks of two), a job's nodes come in whole blocks and each Ray node carries its
block as its domain; with topology/tree SLURM takes --segment and the job runs; on an older
SLURM, --segment is refused before the queue, in one line."""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.lab.helpers import assert_no_leftovers, job_dir, submit

pytestmark = [
    pytest.mark.lab,
    pytest.mark.smoke,
    pytest.mark.smoke_versions,
    pytest.mark.four_nodes,
    pytest.mark.timeout(420),
]


def _slurm() -> tuple[tuple[int, int], str]:
    version = subprocess.run(["sinfo", "--version"], capture_output=True, text=True, check=True).stdout.split()[-1]
    config = subprocess.run(["scontrol", "show", "config"], capture_output=True, text=True, check=True).stdout
    plugin = next(line.split("=", 1)[1].strip() for line in config.splitlines() if line.startswith("TopologyPlugin"))
    major, minor = version.split(".")[:2]
    return (int(major), int(minor)), plugin


def test_segment_places_nodes_by_block_or_is_refused_before_the_queue(
    lab: list[str], request: pytest.FixtureRequest
) -> None:
    version, plugin = _slurm()
    if version < (23, 11):
        res, data = submit("topology_check.py", nodes=2, extra=("--segment", "2"))
        assert res.returncode == 2 and not data, res.stdout
        assert "--segment 2: SLURM 22.05" in res.stderr and "has no segments (23.11" in res.stderr, res.stderr
        return
    if plugin != "topology/block":  # SLURM takes --segment and has no blocks to place by
        res, data = submit("exit_code.py", "0", nodes=2, extra=("--segment", "2"))
        assert res.returncode == 0 and data["state"] == "COMPLETED", (res.stdout, res.stderr)
    nodes = request.getfixturevalue("lab4")  # the same lab with 4 nodes: blocks of two
    assert _slurm()[1] == "topology/block" and len(nodes) == 4, nodes
    res, data = submit("topology_check.py", nodes=4, extra=("--segment", "2"), timeout=200)
    assert res.returncode == 0, (res.stdout[-2000:], res.stderr[-2000:])
    assert "#SBATCH --segment=2" in (job_dir(data) / "sbatch.sh").read_text()
    line = next(x for x in (job_dir(data) / "logs" / "driver.log").read_text().splitlines() if x.startswith("{"))
    seen = json.loads(line)
    domains = {node: domain for node, (domain, _rank) in seen["topology"].items()}
    assert domains == {
        "node1": "nvlink_domain_b1",
        "node2": "nvlink_domain_b1",
        "node3": "nvlink_domain_b2",
        "node4": "nvlink_domain_b2",
    }, seen
    assert seen["segment"] in (["node1", "node2"], ["node3", "node4"])  # one block, whole
    node_log = (job_dir(data) / "logs" / "node-node3.log").read_text()
    assert "topology: domain b2 (the switch or block over it in b2.node3)" in node_log
    assert_no_leftovers(nodes, data["job_id"])
