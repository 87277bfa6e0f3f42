"""A job's workers fork only where a fork cannot be told from an exec (issue 76): with the hash
seed fixed (PYTHONHASHSEED in the job's environment) workers without env_vars of their own are
forks; one given TZ, MALLOC_ARENA_MAX and LANG is exec'd and sees what a fresh Python of its
environment sees; with no seed fixed (the default) nothing forks, and two workers on one node
have their own hash seeds, as exec'd ones do."""

from __future__ import annotations

import json

import pytest

from tests.conftest import run_cli
from tests.lab.helpers import EXPERIMENTS, SPEC, job_dir, wait_gone

pytestmark = [pytest.mark.lab, pytest.mark.lab_shared, pytest.mark.timeout(300)]


def _probe(seed: str | None) -> dict:
    env = {"PYTHONHASHSEED": seed} if seed is not None else {}
    argv = ["submit", SPEC, str(EXPERIMENTS / "fork_probe.py"), "--nodes", "2", "--cpus-per-node", "1", "--json"]
    res = run_cli(*argv, env=env, timeout=60)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout.splitlines()[-1])


def test_workers_fork_only_where_a_fork_cannot_be_told_from_an_exec(lab: list[str], monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.delenv("PYTHONHASHSEED", raising=False)  # the default job: this run's own seed must not leak in
    seeded, default = _probe("0"), _probe(None)
    facts = {}
    for name, data in (("seeded", seeded), ("default", default)):
        wait_gone(data["job_id"], 180)
        path = job_dir(data) / "fork_probe.json"
        assert path.exists(), (
            f"{name} job {data['job_id']}: {(job_dir(data) / 'logs' / 'driver.log').read_text()[-2000:]}"
        )
        facts[name] = json.loads(path.read_text())
    plain = [f for f in facts["seeded"] if f["kind"] == "plain"]
    given = [f for f in facts["seeded"] if f["kind"] == "given"]
    assert len(plain) == 4 and len(given) == 2 and {f["node"] for f in plain} == {f["node"] for f in given}
    assert all(f["forked"] for f in plain), "with the hash seed fixed, a job's workers are forks"
    for f in given:  # TZ, MALLOC_ARENA_MAX, LANG differ from the node's: exec'd, and as an exec'd Python
        assert not f["forked"] and f["mine"] == f["execd"], f
        assert f["mine"]["tz"] == "JST" and f["mine"]["malloc"] == "2" and f["mine"]["lang"] == "C"
        assert "differs" in f["server_log"], f  # why, in the node's fork-server log (LANG=C: Python's UTF-8 mode)
    for f in plain:  # a fork sees what a fresh Python of its environment sees, its hash seed included
        assert f["mine"] == f["execd"], f
    for f in facts["default"]:  # no seed fixed: no fork server at all, every worker exec'd
        assert not f["forked"] and f["server_log"] is None, f
        assert {k: v for k, v in f["mine"].items() if k != "hash"} == {
            k: v for k, v in f["execd"].items() if k != "hash"
        }
    for node in {f["node"] for f in facts["default"]}:
        hashes = [f["mine"]["hash"] for f in facts["default"] if f["node"] == node and f["kind"] == "plain"]
        assert len(hashes) == 2 and hashes[0] != hashes[1], f"two workers on {node}, one hash seed: {hashes}"
