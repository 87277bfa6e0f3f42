"""`submit --cluster first` from a laptop (issue 80): each cluster reached only through its login
node is asked there, takes its job there behind the start gate (`submit --start-gate-s`), and
is looked at, given the go and dropped there (the hidden `race` command); the kept job is then
followed on its login node as submit would follow it."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from slurm_rl.laptop import cli as laptop_cli
from slurm_rl.laptop.forward import to_argv
from slurm_rl.login.cli import cli
from slurm_rl.login.submission import first
from tests.unit.conftest import Laptop

pytestmark = pytest.mark.unit


def test_first_races_through_each_login_node_and_follows_the_kept_job_there(
    tmp_path: Path, laptop: Laptop, monkeypatch: pytest.MonkeyPatch
) -> None:
    exp = laptop.exp
    monkeypatch.setattr(first, "POLL_S", 0.01)
    states = {"me@a": ["PENDING"], "me@b": ["PENDING", "PENDING", "RUNNING"]}
    ids = {"me@a": 48001, "me@b": 55000001}
    calls: list[tuple[str, str, list[str]]] = []

    class Forwarder(laptop_cli.LoginForwarder):
        def capture(self, name, command, params, target):  # type: ignore[no-untyped-def]
            argv = to_argv(command, params)
            calls.append((name, target, argv))
            if name == "submit" and params.get("estimate"):
                return 0, json.dumps({"start": time.time(), "waiting": None}), ""
            if name == "submit":
                return 0, json.dumps({"job_id": ids[target], "state": "PENDING"}), ""
            if params.get("look"):
                queue = states[target]
                return 0, json.dumps({"state": queue.pop(0) if len(queue) > 1 else queue[0], "reason": ""}), ""
            return 0, "", ""  # --go, --drop

        def forward(self, name, command, params, target):  # type: ignore[no-untyped-def]
            calls.append((f"forward {name}", target, to_argv(command, params)))
            return 3  # the kept job's driver exit code, as submit --wait there exits

    runner = CliRunner()
    laptop.add_clusters("ab")
    res = runner.invoke(cli, ["submit", "--cluster", "first", str(exp), "-N", "2", "--wait"], obj=Forwarder())
    assert res.exit_code == 3, res.output
    placed = [(t, argv) for n, t, argv in calls if n == "submit" and "--estimate" not in argv]
    assert sorted(t for t, _ in placed) == ["me@a", "me@b"]
    for _, argv in placed:  # behind the gate, not followed there, the command as typed
        assert argv[argv.index("--start-gate-s") + 1] == str(first.GATE_S) and "--wait" not in argv, argv
        assert "--json" in argv and "2" in argv, argv
    races = [(t, argv) for n, t, argv in calls if n == "race"]
    assert any(t == "me@b" and "--go" in argv and argv[-1] == "55000001" for t, argv in races), races
    assert any(t == "me@a" and "--drop" in argv and "48001" in argv for t, argv in races), races
    assert not any(t == "me@b" and "--drop" in argv for t, argv in races), "the kept one is never dropped"
    assert not any(t == "me@a" and "--go" in argv for t, argv in races), "the cancelled one never gets the go"
    follow = [(t, argv) for n, t, argv in calls if n == "forward race"]
    assert len(follow) == 1 and follow[0][0] == "me@b", follow
    assert "--wait" in follow[0][1] and follow[0][1][-1] == "55000001" and "--named" in follow[0][1], follow
    said = res.stderr
    assert "--cluster first: submitted " in said and "b:55000001 started first; kept" in said, said
    assert "--cluster first: cancelled a:48001" in said, said
