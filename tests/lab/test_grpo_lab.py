"""examples/grpo.py on the 3-node lab, as the README runs it (at most 3 steps in CI): one
policy/generation pair per node, the PNGs and `slurm-rl plot`; and the time-limit warning:
the driver checkpoints, asks to be requeued, and the next attempt continues the step count."""

from __future__ import annotations

import json
import subprocess

import pytest

from slurm_rl.core.events import read_events
from tests.conftest import REPO, run_cli
from tests.lab.helpers import SPEC, assert_no_leftovers, wait_for, wait_gone

pytestmark = [pytest.mark.lab, pytest.mark.timeout(420)]
GRPO = str(REPO / "examples" / "grpo.py")


def steps_by_attempt(job_dir) -> list[tuple[int, int]]:  # type: ignore[no-untyped-def]
    rows = [json.loads(line) for line in (job_dir / "metrics.jsonl").read_text().splitlines()]
    return [(r["attempt"], r["step"]) for r in rows]


def test_grpo_on_three_nodes_then_plot(lab: list[str]) -> None:
    res = run_cli("submit", SPEC, GRPO, "--nodes", "3", "--wait", "--json", "--", "--steps", "3", timeout=300)
    data = json.loads(res.stdout.splitlines()[-1])
    from pathlib import Path

    job_dir = Path(data["job_dir"])
    log = (job_dir / "logs" / "driver.log").read_text()
    assert res.returncode == 0, (res.stderr[-2000:], log[-3000:])
    assert steps_by_attempt(job_dir) == [(0, 0), (0, 1), (0, 2)]
    for node in ("node1", "node2", "node3"):  # a policy worker on every node (the status table)
        assert f"│ {node} (10.77" in log or f"{node} (10.77" in log, node
    assert any(e["event"] == "workers_ready" for e in read_events(job_dir / "events.jsonl"))
    (job_dir / "metrics.png").unlink()
    plotted = run_cli("plot", str(data["job_id"]), timeout=60)
    assert plotted.returncode == 0, plotted.stderr
    assert plotted.stdout.split() == [str(job_dir / "metrics.png"), str(job_dir / "timeline.png")]
    assert (job_dir / "metrics.png").stat().st_size > 5000
    assert_no_leftovers(lab, data["job_id"])


def test_time_limit_warning_checkpoints_requeues_and_the_next_attempt_continues(lab: list[str]) -> None:
    res = run_cli("submit", SPEC, GRPO, "--nodes", "2", "--json", "--", "--steps", "3", timeout=60)
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout.splitlines()[-1])
    from pathlib import Path

    job_dir, job_id = Path(data["job_dir"]), data["job_id"]
    events = job_dir / "events.jsonl"
    assert wait_for(lambda: any(e["event"] == "driver_start" for e in read_events(events)), 120)
    # what SLURM does before the time limit with --signal B:USR2@N: USR2 to the batch shell
    subprocess.run(["scancel", "--signal=USR2", "--batch", str(job_id)], check=True, timeout=30)
    # the requeued job leaves the queue for a moment: wait for the end of its last attempt
    assert wait_for(lambda: any(e["event"] == "job_end" for e in read_events(events)), 360), read_events(events)
    wait_gone(job_id, timeout_s=60)
    got = read_events(events)
    [requeue] = [e for e in got if e["event"] == "requeue"]
    assert requeue["requested"] is True and requeue["exit_code"] == 75 and requeue["attempt"] == 0
    assert [e["exit_code"] for e in got if e["event"] == "job_end"] == [0]
    steps = steps_by_attempt(job_dir)
    assert [s for _, s in steps] == [0, 1, 2] and steps[0][0] == 0 and steps[-1][0] == 1, steps  # continued
    log = (job_dir / "logs" / "driver.log").read_text()
    assert "asking to be requeued" in log and "resuming from" in log
    assert_no_leftovers(lab, job_id)
