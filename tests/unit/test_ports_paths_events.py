from __future__ import annotations

import json
from pathlib import Path

import pytest

from slurm_rl.core.errors import UsageError
from slurm_rl.core.events import append_event, read_events, write_json
from slurm_rl.core.paths import JobPaths, node_dir_of_session, node_temp_dir, ray_temp_dir
from slurm_rl.core.ports import (
    BLOCK_SIZE,
    PortsBusy,
    check_port_base,
    choose_ports,
    ephemeral_range,
    free_ports,
    listen_range,
    port_free,
    preferred_gcs_port,
)


def test_ports_are_free_ones_and_worker_ports_unbounded() -> None:
    head, worker = choose_ports(1001, None, head=True), choose_ports(1001, None, head=False)
    assert head.gcs == preferred_gcs_port(1001)  # the job's predictable port, when free
    assert worker.gcs is None and worker.dashboard is None and worker.dashboard_agent_listen
    flags = " ".join(head.ray_start_args())
    assert "--min-worker-port=0" in flags and "--max-worker-port=0" in flags  # OS-assigned: no ceiling
    assert "--dashboard-agent-listen-port=" in flags  # never Ray's fixed 52365
    assert preferred_gcs_port(1001) != preferred_gcs_port(1002)


def test_a_taken_preferred_port_is_replaced_by_a_free_one() -> None:
    import socket

    with socket.socket() as s:
        s.bind(("", preferred_gcs_port(7)))
        s.listen()
        ports = choose_ports(7, None, head=True)
        assert ports.gcs != preferred_gcs_port(7) and port_free(ports.gcs)


def test_port_base_override_is_pinned_and_checked() -> None:
    import socket

    # a block that is free right now, below the kernel's ephemeral range (a busy machine's
    # outgoing connections take ports there at random)
    base = next(b for b in range(20000, 30000, BLOCK_SIZE) if all(port_free(b + i) for i in range(BLOCK_SIZE)))
    pinned = choose_ports(5, base, head=True)
    assert (pinned.gcs, pinned.dashboard, pinned.node_manager) == (base, base + 1, base + 3)
    assert len({v for v in pinned.as_dict().values() if v}) == BLOCK_SIZE - 2
    with pytest.raises(UsageError, match="--port-base"):
        check_port_base(80)
    with socket.socket() as s:
        s.bind(("", base + 3))
        with pytest.raises(PortsBusy, match=rf"port {base + 3} \(node_manager\) is already in use"):
            choose_ports(5, base, head=False)


def test_ray_client_gets_a_free_head_port_and_a_pinned_runtime_env_agent() -> None:
    """--ray-client: the head's Ray Client port is free and distinct from its other ports, the
    runtime-env agent's port is pinned (Ray hands the client proxy port 0 otherwise), and a
    worker node never serves the client."""
    head = choose_ports(1001, None, head=True, ray_client=True)
    drawn = [head.dashboard, head.dashboard_agent_listen, head.ray_client_server, head.runtime_env_agent]
    assert all(drawn) and len(set(drawn)) == 4 and head.gcs not in drawn
    assert f"--runtime-env-agent-port={head.runtime_env_agent}" in head.ray_start_args()
    assert not any("client" in flag for flag in head.ray_start_args())  # the head's own flag (head.py)
    assert choose_ports(1001, None, head=True).ray_client_server is None
    worker = choose_ports(1001, None, head=False, ray_client=True)
    assert worker.ray_client_server is None and worker.runtime_env_agent is None
    base = next(b for b in range(20000, 30000, BLOCK_SIZE) if all(port_free(b + i) for i in range(BLOCK_SIZE)))
    assert choose_ports(5, base, head=True, ray_client=True).ray_client_server == base + 8
    assert choose_ports(5, base, head=False, ray_client=True).ray_client_server is None
    ports = free_ports(64)
    assert len(set(ports)) == 64  # held until all are drawn: never one port twice


def test_free_ports_stay_out_of_the_ephemeral_range() -> None:
    """A port of the kernel's ephemeral range, free when probed, can become an outgoing
    connection's source port before Ray binds it: free ports are drawn outside that range
    (above it where a site starts it low), and never on another job's preferred GCS port."""
    assert listen_range((32768, 60999)) == (10000, 32000)
    assert listen_range((20000, 60999)) == (10000, 20000)
    assert listen_range((9000, 60000)) == (60001, 65536)
    assert listen_range((1024, 65535)) is None  # no room: the OS chooses
    low, high = ephemeral_range()
    for port in free_ports(32):
        assert not low <= port <= high and port % 100 != 0, port


def test_node_temp_dir_leaves_room_for_ray_sockets() -> None:
    # Ray puts sockets at <temp>/session_<date>_<time>_<us>_<pid>/sockets/plasma_store (~70 chars)
    session = "/session_2026-11-22_11-04-45_123456_4194304/sockets/plasma_store"
    longest = ray_temp_dir(node_temp_dir(4294967295)) + session
    assert len(longest) < 107
    # and a Ray worker finds the job's node-local dir (its job dir pointer) from its session dir
    assert node_dir_of_session(ray_temp_dir(node_temp_dir(7)) + "/session_2026-12-02_1_2") == Path("/tmp/srl-7")


def test_job_paths(tmp_path: Path) -> None:
    p = JobPaths.for_job(str(tmp_path), "alice", "grpo", 42)
    assert p.job_dir == tmp_path / "alice" / "grpo" / "42"
    assert p.node_log("node1").name == "node-node1.log" and p.name_dir == tmp_path / "alice" / "grpo"


def test_events_append_and_read(tmp_path: Path) -> None:
    f = tmp_path / "events.jsonl"
    append_event(f, "submitted", job_id=1)
    append_event(f, "ready", nodes=3)
    with open(f, "a") as fh:
        fh.write('{"partial": ')  # a line being written is skipped, not fatal
    ev = read_events(f)
    assert [e["event"] for e in ev] == ["submitted", "ready"] and ev[1]["nodes"] == 3
    assert ev[0]["t"] <= ev[1]["t"]


def test_write_json_is_atomic(tmp_path: Path) -> None:
    f = tmp_path / "cluster.json"
    write_json(f, {"a": 1})
    assert json.loads(f.read_text()) == {"a": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["cluster.json"]
