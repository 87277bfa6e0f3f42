"""The driver API on a slurm-rl job: a worker group over the lab's 3 nodes, gloo all-reduce."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.lab.helpers import (
    assert_no_leftovers,
    exit_reason,
    fabric_ip,
    job_cluster,
    job_dir,
    lab_spec,
    submit,
    tagged_json,
)

pytestmark = [pytest.mark.lab, pytest.mark.lab_shared, pytest.mark.timeout(240)]


def test_worker_group_spans_nodes_and_allreduces(lab: list[str]) -> None:
    res, data = submit("allreduce.py", nodes=3)
    log = (job_dir(data) / "logs" / "driver.log").read_text()
    assert res.returncode == 0, log[-3000:]
    results = tagged_json(log, "REPORT")
    assert [r["sum"] for r in results] == [6.0, 6.0, 6.0]
    assert sorted(r["node_rank"] for r in results) == [0, 1, 2]
    assert sorted(r["ip"] for r in results) == ["10.77.0.11", "10.77.0.12", "10.77.0.13"]
    # without network_interface: the network the node names resolve to, for Ray and gloo alike
    assert sorted(r["ray_ip"] for r in results) == ["10.77.0.11", "10.77.0.12", "10.77.0.13"]
    assert {r["master_addr"] for r in results} <= {"10.77.0.11", "10.77.0.12", "10.77.0.13"}
    assert all(ip.startswith("10.77.") for r in results for ip in r["tcp_local_ips"]), results
    assert {r["gloo_ifname"] for r in results} == {None}
    assert "Worker Group: gloo (3 workers)" in log
    assert_no_leftovers(lab, data["job_id"])


def test_network_interface_puts_ray_and_gloo_on_the_fabric(lab: list[str], tmp_path: Path) -> None:
    """Every lab node also has fab0 (10.78.0.1K); node names resolve to 10.77. With the spec's
    network_interface, the head's address, every Ray node, MASTER_ADDR and gloo's own
    connections are on 10.78, and NCCL/gloo are told the interface."""
    res, data = submit("allreduce.py", nodes=2, spec=lab_spec(tmp_path, network_interface="fab0"))
    log = (job_dir(data) / "logs" / "driver.log").read_text()
    assert res.returncode == 0, log[-3000:]
    results = tagged_json(log, "REPORT")
    cluster = job_cluster(data)  # whichever two nodes SLURM gave it
    fabric = sorted(fabric_ip(node) for node in cluster["nodes"])
    assert [r["sum"] for r in results] == [3.0, 3.0]
    assert tagged_json(log, "RAY_NODES") == fabric
    assert sorted(r["ray_ip"] for r in results) == fabric
    assert {r["master_addr"] for r in results} <= set(fabric)
    assert all(r["tcp_local_ips"] for r in results), results
    assert all(ip.startswith("10.78.") for r in results for ip in r["tcp_local_ips"]), results
    assert {(r["gloo_ifname"], r["nccl_ifname"]) for r in results} == {("fab0", "fab0")}
    assert cluster["address"].startswith(fabric_ip(cluster["head_node"]) + ":"), cluster
    assert cluster["network_interface"] == "fab0"
    assert_no_leftovers(lab, data["job_id"])


def test_a_node_without_the_network_fails_fast_named(lab: list[str], tmp_path: Path) -> None:
    res, data = submit("allreduce.py", nodes=2, spec=lab_spec(tmp_path, network_interface="10.99.0.0/16"))
    assert res.returncode != 0
    reason = exit_reason(data)
    assert "no address in 10.99.0.0/16 on this node (spec field network_interface; its interfaces:" in reason
    assert "fab0 10.78.0.1" in reason, reason
    events = [json.loads(line) for line in (job_dir(data) / "events.jsonl").read_text().splitlines()]
    assert not any(e["event"] == "driver_start" for e in events)  # failed before Ray or the driver
    assert_no_leftovers(lab, data["job_id"])
