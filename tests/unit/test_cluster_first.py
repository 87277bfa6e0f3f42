"""`submit --cluster first` (issue 80 item 4): the job submitted to every cluster that can run
it, each behind a start gate; the first SLURM starts gets the go, every other is cancelled before
it passes its gate and its job dir goes; Ctrl-C or every job ending drops them all."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from slurm_rl.config.spec import load_spec_file
from slurm_rl.core.errors import JobError
from slurm_rl.core.paths import JobPaths
from slurm_rl.login.submission import first
from slurm_rl.login.submission.choose import Offer
from slurm_rl.login.submission.plan import plan_job
from slurm_rl.login.submission.render import render_job
from slurm_rl.login.submission.resolve import JobOptions
from slurm_rl.login.submission.submit import Submitted
from slurm_rl.slurm import JobState

REPO = Path(__file__).resolve().parents[2]
OPTS = JobOptions(experiment="/home/alice/exp.py", nodes=2, name="exp", user="alice", python="/venv/bin/python")


class Queue:
    """One cluster's SLURM as first.py sees it: the states its job goes through, one per look."""

    def __init__(self, states: list[str]) -> None:
        self.states, self.cancelled = states, False

    def job_state(self, job_id: int | str) -> JobState:
        if self.cancelled:
            return JobState(job_id, "CANCELLED")
        state = self.states.pop(0) if len(self.states) > 1 else self.states[0]
        if state == "^C":
            raise KeyboardInterrupt
        return JobState(job_id, state, reason="Resources" if state == "PENDING" else "")

    def scancel(self, job_id: int | str) -> None:
        self.cancelled = True


@pytest.fixture
def race(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    monkeypatch.setattr(first, "POLL_S", 0.01)
    gates: list[int] = []

    def fake_submit(spec, opts, client):  # type: ignore[no-untyped-def]
        gates.append(opts.start_gate_s)
        job_id = 1000 + len(gates)
        paths = JobPaths(tmp_path / str(job_id))
        paths.job_dir.mkdir()
        (paths.job_dir / "manifest.json").write_text("{}")
        return Submitted(job_id, paths, "")

    monkeypatch.setattr(first, "submit", fake_submit)

    def offers(**queues: Queue) -> list[Offer]:
        return [Offer(name, 0.0, "", object(), OPTS, q) for name, q in queues.items()]  # type: ignore[arg-type]

    return offers, gates, tmp_path


def test_the_first_to_start_gets_the_go_and_the_others_are_cancelled_and_gone(race) -> None:  # type: ignore[no-untyped-def]
    offers, gates, root = race
    a, b = Queue(["PENDING", "PENDING", "PENDING", "RUNNING"]), Queue(["PENDING", "RUNNING"])
    said: list[str] = []
    won = first.submit_first(offers(a=a, b=b), said.append)
    assert isinstance(won, first.Placed)
    kept, res = won.offer, won.res
    assert kept.name == "b" and res.job_id == 1002 and gates == [first.GATE_S, first.GATE_S]
    assert res.paths.start_go.exists() and a.cancelled and not b.cancelled
    assert not (root / "1001").exists(), "the cancelled job leaves no job dir"
    assert said[0] == (
        "--cluster first: submitted a:1001, b:1002; the first to start runs, the others are cancelled before they start"
    )
    assert "--cluster first: waiting: a:1001 PENDING (Resources), b:1002 PENDING (Resources)" in said
    assert said[-1] == "--cluster first: b:1002 started first; kept"


def test_one_ending_before_it_starts_leaves_the_race_and_all_ending_is_an_error(race) -> None:  # type: ignore[no-untyped-def]
    offers, _, root = race
    said: list[str] = []
    kept = first.submit_first(offers(a=Queue(["FAILED"]), b=Queue(["PENDING", "RUNNING"])), said.append)
    assert kept.label == "b:1002"
    assert "--cluster first: a:1001 ended before it started (FAILED); the others still race" in said
    with pytest.raises(JobError, match="every job ended before one started"):
        first.submit_first(offers(c=Queue(["PENDING", "TIMEOUT"])), said.append)
    assert not (root / "1003").exists()


def test_ctrl_c_while_waiting_cancels_every_job(race) -> None:  # type: ignore[no-untyped-def]
    offers, _, root = race
    a, b = Queue(["PENDING", "^C"]), Queue(["PENDING"])
    with pytest.raises(KeyboardInterrupt):
        first.submit_first(offers(a=a, b=b), lambda line: None)
    assert a.cancelled and b.cancelled and not any(root.iterdir())


def test_the_gate_is_in_the_script_of_a_race_only_and_holds_until_the_go(tmp_path: Path) -> None:
    spec = load_spec_file(REPO / "cluster_specs" / "lab.json")
    plain = render_job(plan_job(spec, OPTS)).script
    gated = render_job(plan_job(spec, OPTS.model_copy(update={"start_gate_s": 1}))).script
    assert "start_go" not in plain and "--cluster first" not in plain
    assert 'until [ -e "$SLURM_RL_JOB_DIR"/start_go ]' in gated
    # the gate alone, run: with no go it ends within its time, saying so, and starts nothing
    start = gated.index("slurm_rl_json() {")
    helpers = gated[start : gated.index("\n}\n", gated.index("slurm_rl_exit() {")) + 3]
    gate = gated[gated.index("slurm_rl_gate_end=") : gated.index("slurm_rl_event chosen")]
    job = tmp_path / "job"
    job.mkdir()
    script = f"{helpers}\n{gate}\necho started\n"
    out = subprocess.run(["bash", "-c", script], env={"SLURM_RL_JOB_DIR": str(job), "PATH": "/usr/bin:/bin"},
                         capture_output=True, text=True, timeout=30)  # fmt: skip
    assert out.returncode == 1 and "started" not in out.stdout
    assert (job / "exit_cause").read_text() == "cancelled\n"
    assert "no go from the submitter" in (job / "exit_reason").read_text()
    (job / "start_go").touch()
    assert subprocess.run(["bash", "-c", script], env={"SLURM_RL_JOB_DIR": str(job)}, capture_output=True,
                          text=True, timeout=30).stdout == "started\n"  # fmt: skip
