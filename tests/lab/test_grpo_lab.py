"""examples/grpo.py on the 3-node lab, as the README runs it (3 steps in CI): one
policy/generation pair per node; the time-limit warning: the driver checkpoints, asks to be
requeued, and the next attempt continues the step count; the PNGs and `slurm-rl plot`.

On a lab with Pyxis (CI's) it runs as a GPU site runs it, every step in a container of the lab
image (cluster_specs/lab-pyxis.json): the requeued attempt starts a new container on each node."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from slurm_rl.core.events import read_events
from tests.conftest import REPO, run_cli
from tests.lab.helpers import SPEC, SPEC_PYXIS, assert_no_leftovers, job_containers, pyxis_missing, wait_for, wait_gone

pytestmark = [pytest.mark.lab, pytest.mark.timeout(420)]
GRPO = str(REPO / "examples" / "grpo.py")


def steps_by_attempt(job_dir) -> list[tuple[int, int]]:  # type: ignore[no-untyped-def]
    rows = [json.loads(line) for line in (job_dir / "metrics.jsonl").read_text().splitlines()]
    return [(r["attempt"], r["step"]) for r in rows]


@pytest.fixture
def spec(request: pytest.FixtureRequest, lab: list[str]) -> str:
    if pyxis_missing():
        return SPEC
    request.getfixturevalue("pyxis_lab")  # the image is current
    return SPEC_PYXIS


def test_grpo_on_three_nodes_preempted_requeued_resumed_then_plotted(lab: list[str], spec: str) -> None:
    """One job (lab time is CI time): 3 steps on 3 nodes; the time-limit warning arrives while
    the workers start, so attempt 0 checkpoints after step 0 and asks to be requeued; attempt 1
    resumes and runs steps 1 and 2; then `slurm-rl plot` redraws the pictures."""
    res = run_cli("submit", spec, GRPO, "--nodes", "3", "--json", "--", "--steps", "3", timeout=60)
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout.splitlines()[-1])
    job_dir, job_id = Path(data["job_dir"]), data["job_id"]
    events = job_dir / "events.jsonl"
    assert wait_for(lambda: any(e["event"] == "driver_start" for e in read_events(events)), 240)
    # what SLURM does before the time limit with --signal B:USR2@N: USR2 to the batch shell
    subprocess.run(["scancel", "--signal=USR2", "--batch", str(job_id)], check=True, timeout=30)
    # the requeued job leaves the queue for a moment: wait for the end of its last attempt
    assert wait_for(lambda: any(e["event"] == "job_end" for e in read_events(events)), 360), read_events(events)
    wait_gone(job_id, timeout_s=60)
    got = read_events(events)
    [requeue] = [e for e in got if e["event"] == "requeue"]
    assert requeue["requested"] is True and requeue["exit_code"] == 75 and requeue["attempt"] == 0
    assert [e["exit_code"] for e in got if e["event"] == "job_end"] == [0]
    assert steps_by_attempt(job_dir) == [(0, 0), (1, 1), (1, 2)]  # the step count continued
    log = (job_dir / "logs" / "driver.log").read_text()
    assert "asking to be requeued" in log and "resuming from" in log
    for node in ("node1", "node2", "node3"):  # a policy worker on every node (the status table)
        assert f"{node} (10.77" in log, node
    assert any(e["event"] == "workers_ready" for e in got)
    (job_dir / "metrics.png").unlink()
    plotted = run_cli("plot", str(job_id), timeout=60)
    assert plotted.returncode == 0, plotted.stderr
    assert plotted.stdout.split() == [str(job_dir / "metrics.png"), str(job_dir / "timeline.png")]
    assert (job_dir / "metrics.png").stat().st_size > 5000
    assert_no_leftovers(lab, job_id)
    assert wait_for(lambda: not job_containers(lab, job_id), 15), job_containers(lab, job_id)


def test_grpo_lm_runs_unchanged_on_three_nodes(lab: list[str]) -> None:
    """examples/grpo_lm.py as written, a few steps: data-parallel policy ranks and generation
    workers on all 3 nodes, the warm start, GRPO steps, held-out accuracy, the PNGs."""
    res = run_cli(
        "submit",
        SPEC,
        str(REPO / "examples" / "grpo_lm.py"),
        *("--nodes", "3", "--wait", "--json", "--"),
        *("--steps", "4", "--eval-every", "2", "--sft-steps", "30"),
        timeout=240,
    )
    assert res.returncode == 0, (res.stdout[-2000:], res.stderr[-3000:])
    data = json.loads(res.stdout.splitlines()[-1])
    job_dir = Path(data["job_dir"])
    log = (job_dir / "logs" / "driver.log").read_text()
    assert "3 policy workers (data-parallel) and 3 generation workers on 3 node(s)" in log, log
    assert "warm start: 30 supervised steps" in log and "held-out accuracy:" in log, log
    rows = [json.loads(line) for line in (job_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows if "heldout_accuracy" in r] == [0, 2, 4]
    assert [r["step"] for r in rows if "reward" in r] == [1, 2, 3, 4]
    assert (job_dir / "metrics.png").stat().st_size > 5000
    assert_no_leftovers(lab, data["job_id"])
