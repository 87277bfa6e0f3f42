from __future__ import annotations

import json
from pathlib import Path

import pytest

from slurm_rl.core.errors import UsageError
from slurm_rl.core.events import append_event, read_events, write_json
from slurm_rl.core.paths import JobPaths, node_temp_dir
from slurm_rl.core.ports import BLOCK_SIZE, PORT_RANGE_END, PORT_RANGE_START, ports_for


def test_port_block_is_job_scoped_and_pins_every_port() -> None:
    a, b = ports_for(1001), ports_for(1002)
    assert a.base != b.base
    values = [v for k, v in a.as_dict().items() if k not in ("base", "max_worker")]
    assert len(set(values)) == len(values)
    assert all(a.base <= v < a.base + BLOCK_SIZE for v in a.as_dict().values())
    assert PORT_RANGE_START <= a.base and a.max_worker < PORT_RANGE_END
    flags = " ".join(a.ray_start_args())
    for name in ("node-manager", "object-manager", "min-worker", "max-worker", "metrics-export",
                 "dashboard-agent-listen", "dashboard-agent-grpc", "runtime-env-agent"):
        assert f"--{name}-port=" in flags


def test_port_base_override() -> None:
    assert ports_for(5, port_base=40000).gcs == 40000
    with pytest.raises(UsageError, match="--port-base"):
        ports_for(5, port_base=80)


def test_node_temp_dir_leaves_room_for_ray_sockets() -> None:
    # Ray puts sockets at <temp>/session_<date>_<time>_<us>_<pid>/sockets/plasma_store (~70 chars)
    longest = node_temp_dir(4294967295) + "/session_2026-11-22_11-04-45_123456_4194304/sockets/plasma_store"
    assert len(longest) < 107


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
