"""examples/grpo_lm.py on the 3-node lab, unchanged (4 steps in CI): data-parallel policy
ranks and generation workers on every node; the time-limit warning: the driver checkpoints, asks
to be requeued, and the next attempt continues the step count; the PNGs and `slurm-rl plot`.
(examples/grpo.py, the README's first example, runs in the unit suite and under `slurm-rl run`.)

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

pytestmark = [pytest.mark.lab, pytest.mark.lab_shared, pytest.mark.timeout(420)]
GRPO_LM = str(REPO / "examples" / "grpo_lm.py")


def steps_by_attempt(rows: list[dict]) -> list[tuple[int, int]]:
    return [(r["attempt"], r["step"]) for r in rows if "step" in r]


@pytest.fixture
def spec(request: pytest.FixtureRequest, lab: list[str]) -> str:
    if pyxis_missing():
        return SPEC
    request.getfixturevalue("pyxis_lab")  # the image is current
    return SPEC_PYXIS


def test_grpo_lm_on_three_nodes_preempted_requeued_resumed_then_plotted(lab: list[str], spec: str) -> None:
    """One job (lab time is CI time): examples/grpo_lm.py as written, 4 steps on 3 nodes (3
    data-parallel policy ranks, 3 generation workers); the time-limit warning arrives while the
    workers start, so attempt 0 does the warm start and step 1, checkpoints and asks to be
    requeued; attempt 1 resumes and runs steps 2-4; then `slurm-rl plot` redraws the pictures.
    12 prompts of 4 answers a step (the defaults' 32 of 8 cost a quarter of the test's CPU and
    prove nothing more here; the unit suite's run learns with them)."""
    res = run_cli(
        "submit",
        spec,
        GRPO_LM,
        *("--nodes", "3", "--json", "--"),
        *("--steps", "4", "--eval-every", "2", "--sft-steps", "30", "--prompts", "12", "--group-size", "4"),
        timeout=60,
    )
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
    log = (job_dir / "logs" / "driver.log").read_text()
    assert "3 policy workers (data-parallel) and 3 generation workers on 3 node(s)" in log, log
    assert "warm start: 30 supervised steps" in log and "asking to be requeued" in log, log
    assert "resuming from" in log and "held-out accuracy:" in log, log
    rows = [json.loads(line) for line in (job_dir / "metrics.jsonl").read_text().splitlines()]
    # the step count continued: the warm start's evaluation and step 1 in attempt 0, the rest in 1
    assert steps_by_attempt(rows) == [(0, 0), (0, 1), (1, 2), (1, 3), (1, 4)]
    assert [r["step"] for r in rows if "heldout_accuracy" in r] == [0, 2, 4]
    (job_dir / "metrics.png").unlink()
    plotted = run_cli("plot", str(job_id), timeout=60)
    assert plotted.returncode == 0, plotted.stderr
    assert plotted.stdout.split() == [str(job_dir / "metrics.png"), str(job_dir / "timeline.png")]
    assert (job_dir / "metrics.png").stat().st_size > 5000
    assert_no_leftovers(lab, job_id)
    assert wait_for(lambda: not job_containers(lab, job_id), 15), job_containers(lab, job_id)
