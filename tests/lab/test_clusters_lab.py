"""Clusters by name on the lab (issue 80 item 2): a clusters file naming the lab (reached through
its own slurm.conf, as a machine with several clusters' clients reaches each) and a cluster that
does not answer; `clusters` shows the one with its SLURM version and partitions and the other as
one line; `submit --cluster` runs on the lab with no SPEC argument, `status --cluster` finds the
job and `list` names its cluster. The second lab (two clusters side by side) is still to come."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.conftest import REPO, run_cli
from tests.lab.helpers import assert_no_leftovers, lab_spec

pytestmark = [pytest.mark.lab, pytest.mark.lab_shared, pytest.mark.timeout(240)]


def test_a_named_cluster_answers_runs_the_job_and_a_silent_one_is_one_line(lab: list[str], tmp_path: Path) -> None:
    env = {"SLURM_RL_CLUSTERS": str(tmp_path / "clusters.json")}
    here = lab_spec(tmp_path, slurm_conf="/etc/slurm/slurm.conf")
    gone = tmp_path / "gone.json"
    gone.write_text(json.dumps({**json.loads(here.read_text()), "slurm_conf": "/nonexistent/slurm.conf"}))
    for name, spec in (("a", here), ("gone", gone)):
        assert run_cli("clusters", "add", name, str(spec), env=env).returncode == 0
    t0 = time.monotonic()
    shown = run_cli("clusters", env=env, timeout=60)
    took = time.monotonic() - t0
    assert shown.returncode == 0, shown.stderr
    lines = dict(line.split(": ", 1) for line in shown.stdout.splitlines())
    assert lines["a"].startswith("SLURM 26.05") and "lab*" in lines["a"], shown.stdout
    assert lines["gone"].startswith("does not answer: ") and "/nonexistent/slurm.conf" in lines["gone"], shown.stdout
    assert took < 25, f"the clusters are asked in parallel, each bounded: {took:.1f} s"
    res = run_cli(
        "submit", "--cluster", "a", str(REPO / "examples" / "hello.py"), "-N", "1", "--wait", "--json",
        env=env, timeout=180,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr[-2000:]
    job = json.loads([line for line in res.stdout.splitlines() if line.startswith("{")][-1])
    status = run_cli("status", str(job["job_id"]), "--cluster", "a", "--json", env=env)
    assert json.loads(status.stdout.splitlines()[-1])["state"] == "COMPLETED", status.stdout
    listed = run_cli("list", env=env).stdout.splitlines()
    assert listed[0].split()[:2] == ["cluster", "job"], listed[:2]
    row = next(line for line in listed if str(job["job_id"]) in line.split())
    assert row.split()[:2] == ["a", str(job["job_id"])] and "COMPLETED" in row, row
    print(f"clusters over one answering and one silent cluster: {took:.1f} s")
    assert_no_leftovers(lab, job["job_id"])


def test_cluster_auto_goes_where_slurm_would_start_it_and_says_why(lab: list[str], tmp_path: Path) -> None:
    env = {"SLURM_RL_CLUSTERS": str(tmp_path / "clusters.json")}
    base = json.loads(lab_spec(tmp_path).read_text())
    specs = {  # one too small for the job, one that can run it, one that does not answer
        "small": {**base, "partition": "labcpu"},  # node1 alone
        "whole": base,
        "gone": {**base, "slurm_conf": "/nonexistent/slurm.conf"},
    }
    for name, data in specs.items():
        (tmp_path / f"{name}.json").write_text(json.dumps(data))
        assert run_cli("clusters", "add", name, str(tmp_path / f"{name}.json"), env=env).returncode == 0
    hello = str(REPO / "examples" / "hello.py")
    t0 = time.monotonic()
    dry = run_cli("submit", "--cluster", "auto", hello, "-N", "2", "--dry-run", "--json", env=env, timeout=120)
    took = time.monotonic() - t0
    assert dry.returncode == 0, dry.stderr[-2000:]
    shown = json.loads(dry.stdout)
    assert shown["cluster"] == "whole" and shown["submitted"] is False, shown
    said = next(line for line in dry.stderr.splitlines() if "--cluster auto:" in line)
    assert said.startswith("slurm-rl: --cluster auto: whole (cluster whole: starts now; "), said
    assert "cluster small: cannot run it: " in said and "labcpu" in said, said
    assert "cluster gone: cannot run it: " in said, said
    res = run_cli("submit", "--cluster", "auto", hello, "-N", "2", "--wait", "--json", env=env, timeout=180)
    assert res.returncode == 0, res.stderr[-2000:]
    job = json.loads([line for line in res.stdout.splitlines() if line.startswith("{")][-1])
    assert job["cluster"] == "whole" and job["state"] == "COMPLETED", job
    print(f"--cluster auto over three clusters (one silent), its choice: {took:.1f} s")
    assert_no_leftovers(lab, job["job_id"])
