"""Stalls and stacks on the lab (issue 58): a rank that never joins a gloo all_reduce stalls a
2-node job, which `--stall-action fail` ends FAILED, "stalled", with the stacks of every rank in
the job dir (the odd rank first); a container job whose driver pauses is `stalled` then running
again under `warn`, and `slurm-rl stacks` shows its driver and an actor on every node; an ended
job's `stacks` exits 2 pointing to what it kept; `--wait` and `logs -f` say the stall as it happens."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from slurm_rl.core.events import read_events
from tests.conftest import cli_argv, run_cli
from tests.lab.helpers import SPEC_PYXIS, assert_no_leftovers, job_cluster, job_dir, start, submit, wait_for, wait_gone

pytestmark = [pytest.mark.lab, pytest.mark.lab_shared, pytest.mark.timeout(300)]
STALL_S = 20  # the shortest --stall-timeout slurm-rl takes


@pytest.mark.lab_waits  # SLURM's clocks: first in the lab stream (tests/conftest.py)
def test_a_rank_that_never_joins_the_all_reduce_fails_the_job_as_stalled_with_every_ranks_stack(
    lab: list[str],
) -> None:
    t0 = time.monotonic()
    res, data = submit(
        "stall.py",
        "collective",
        nodes=2,
        extra=("--stall-timeout", f"{STALL_S}s", "--stall-action", "fail"),
        timeout=240,
    )
    took = time.monotonic() - t0
    assert res.returncode != 0 and data["state"] == "FAILED", (res.stdout[-2000:], res.stderr[-2000:])
    assert data["exit_reason"].startswith(f"stalled for {STALL_S}") or data["exit_reason"].startswith("stalled for 2")
    assert "(last progress: step 1 at " in data["exit_reason"], data
    assert "slurm-rl: job" in res.stderr and "stalled for" in res.stderr  # --wait said it when it happened
    events = read_events(job_dir(data) / "events.jsonl")
    [stalled] = [e for e in events if e["event"] == "stalled"]
    assert stalled["action"] == "fail" and stalled["stacks"] in data["exit_reason"]
    report = Path(stalled["stacks"]).read_text()
    print(report)
    groups = [line for line in report.splitlines() if line and not line.startswith((" ", "stacks of"))]
    # rank 1 sleeps in step() instead of joining: first, apart from its three peers
    assert groups[0].startswith("1 worker: rank 1 on ") and "differs from its peers" in groups[0], report
    cluster = job_cluster(data)  # whichever two nodes SLURM gave it
    nodes = ",".join(sorted(cluster["nodes"]))
    assert any(g.startswith(f"3 workers: ranks 0,2,3 on {nodes}") for g in groups), report
    peers = report.split(next(g for g in groups if g.startswith("3 workers")))[1]
    assert "all_reduce (torch/distributed/" in peers.split("\n\n")[0], report
    odd = report.split(groups[0])[1].split("\n\n")[0]
    assert "step (" in odd and "hang_worker.py:" in odd and "all_reduce" not in odd, report
    assert any(g.startswith(f"1 driver: on {cluster['head_node']}") for g in groups), report
    assert took < 180, f"{took:.0f} s: a 20 s stall should end the job within about a minute of it"
    assert_no_leftovers(lab, data["job_id"])


def _status(job_id: int) -> dict:
    return json.loads(run_cli("status", str(job_id), "--json").stdout.splitlines()[-1])


def test_a_paused_driver_is_stalled_then_running_again_and_stacks_show_every_node_in_containers(
    pyxis_lab: list[str],
) -> None:
    data = start("stall.py", "pause", nodes=2, spec=SPEC_PYXIS, extra=("--stall-timeout", f"{STALL_S}s"))
    jd = job_dir(data)
    jid = data["job_id"]
    argv = cli_argv("logs", str(jid), "-f")
    follow = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert wait_for(lambda: (jd / "phase-paused").exists(), 180), "the driver never paused"
        stacks = run_cli("stacks", str(jid), timeout=60)
        assert stacks.returncode == 0, stacks.stderr
        print(stacks.stdout)
        head, *groups = [line for line in stacks.stdout.splitlines() if line and not line.startswith(" ")]
        assert head.startswith(f"stacks of job {jid}: ") and "on 2 node(s)" in head, stacks.stdout
        assert any(g.startswith("1 driver: on node") and "experiment.py" in g for g in groups), stacks.stdout
        served = next(g for g in groups if "ray::Resident.serve" in g)
        nodes = ",".join(sorted(job_cluster(data)["nodes"]))  # whichever SLURM gave it
        assert served.startswith(f"2 workers: on {nodes}"), stacks.stdout  # an actor on each node, in its call
        assert "wait_file (" in stacks.stdout and "serve (" in stacks.stdout  # where each one is
        kept = Path(head.split("(kept in ")[1].rstrip(")"))
        assert kept.read_text() == stacks.stdout and kept.is_relative_to(jd)

        assert wait_for(lambda: _status(jid)["phase"] == "stalled", STALL_S + 40, poll_s=1), _status(jid)
        said = _status(jid)
        assert said["state"] == "RUNNING" and said["stall"]["line"].startswith("stalled for "), said
        table = run_cli("status", str(jid)).stdout
        assert f"job {jid}: stalled for " in table and "(last progress: step 1 at " in table, table
        (jd / "go").touch()
        assert wait_for(lambda: (jd / "phase-resumed").exists(), 60)
        assert wait_for(lambda: _status(jid)["phase"] != "stalled", 20, poll_s=1), _status(jid)
        names = [e["event"] for e in read_events(jd / "events.jsonl")]
        assert names.count("stalled") == 1 and "stall_ended" in names[names.index("stalled") :], names
    finally:
        (jd / "go").touch()
        (jd / "done").touch()
    wait_gone(jid, 120)
    _, followed = follow.communicate(timeout=60)  # `logs -f` ends with the job, having said the stall
    assert f"slurm-rl: job {jid}: stalled for " in followed and "(last progress: step 1 at " in followed, followed
    assert _status(jid)["state"] == "COMPLETED"  # warn: the stall changed nothing of the job's end
    ended = run_cli("stacks", str(jid))
    assert ended.returncode == 2 and len(ended.stderr.strip().splitlines()) == 1, ended.stderr
    [stalled] = [e for e in read_events(jd / "events.jsonl") if e["event"] == "stalled"]  # taken after `stacks`'
    assert "is not running" in ended.stderr and f"the last stacks it kept: {stalled['stacks']}" in ended.stderr
