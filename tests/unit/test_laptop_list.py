"""`slurm-rl list` on a laptop (issue 80 item 3): each named cluster reached only through its
login node is asked there, all at once; one whose login node does not answer is one line, and
the others' jobs still show, newest first, each with its cluster."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from slurm_rl.laptop import cli as laptop_cli
from slurm_rl.laptop.forward import to_argv
from slurm_rl.laptop.ssh import LoginError
from slurm_rl.login.cli import cli
from tests.unit.conftest import Laptop

pytestmark = pytest.mark.unit


def row(job: str, cluster_name: str, t: float, state: str = "COMPLETED") -> str:
    fields = {"cluster": "", "job": job, "name": "exp", "state": state, "submitted": "12-07 01:00"}
    return json.dumps(
        {**fields, "progress": "", "job dir": f"/home/me/{job}", "cluster_name": cluster_name, "t": f"{t:.3f}"}
    )


def test_list_asks_each_login_node_at_once_and_one_that_does_not_answer_is_one_line(
    tmp_path: Path, laptop: Laptop, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLURM_RL_INDEX", str(tmp_path / "jobs.jsonl"))  # nothing run here
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # the local default spec's fileroot: empty
    now = time.time()
    answers = {
        # a's login node has another cluster's job in the same fileroot too: not a's, not shown as a's
        "me@a": (0, "\n".join([row("48002", "a", now - 10, "RUNNING"), row("48001", "a", now - 300)]),
                 "(3 older job(s) not shown: `slurm-rl list --all` or `-n N`)\n"),
        "me@b": (0, row("55000001", "b", now - 60), ""),
    }  # fmt: skip
    asked: list[tuple[str, list[str]]] = []
    together = threading.Barrier(3, timeout=10)  # every login node asked at once

    class Forwarder(laptop_cli.LoginForwarder):
        def capture(self, name, command, params, target):  # type: ignore[no-untyped-def]
            asked.append((target, to_argv(command, params)))
            together.wait()
            if target == "me@c":
                raise LoginError("me@c: no answer within 120 s; is the login node up?")
            return answers[target]

    runner = CliRunner()
    laptop.add_clusters("abc")
    # the laptop's default spec names a login node too: list still asks every cluster, not that one
    monkeypatch.setenv("CLUSTER_SPEC_PATH", str(tmp_path / "a.json"))
    laptop_spec = {"cluster_name": "a", "fileroot": str(tmp_path / "a"), "login": "me@a"}
    (tmp_path / "a.json").write_text(json.dumps(laptop_spec))
    res = runner.invoke(cli, ["list"], obj=Forwarder())
    assert res.exit_code == 0, res.output
    assert sorted(t for t, _ in asked) == ["me@a", "me@b", "me@c"]
    assert all("--json" in argv and "--this-cluster" in argv and "--last" not in argv for _, argv in asked), asked
    lines = res.stdout.splitlines()
    assert lines[0].split()[:5] == ["cluster", "job", "name", "state", "submitted"], res.stdout
    assert [ln.split()[:2] for ln in lines[1:]] == [["a", "48002"], ["b", "55000001"], ["a", "48001"]], res.stdout
    said = res.stderr.strip().splitlines()
    assert said == [
        "cluster c: does not answer (me@c: no answer within 120 s; is the login node up?); its jobs are not shown",
        "(3 older job(s) not shown: `slurm-rl list --all` or `-n N`)",
    ], res.stderr
    as_json = runner.invoke(cli, ["list", "--json", "-n", "2"], obj=Forwarder(), catch_exceptions=False)
    got = [json.loads(ln) for ln in as_json.stdout.splitlines()]
    assert [(r["cluster"], r["job"]) for r in got] == [("a", "48002"), ("b", "55000001")]
    assert "(4 older job(s) not shown" in as_json.stderr  # a's three and the one -n 2 left out
