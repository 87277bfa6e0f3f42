"""The soak's own checks (bench/soak*.py): a probe that could not look is a violation, never
"nothing left"; `status` that disagrees with sacct is a violation; the summary counts landed
faults; a covering plan covers every short class for any seed; the soak exits 1 on a violation."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import REPO

sys.path.insert(0, str(REPO / "bench"))
import _lab
import soak
import soak_shapes
from soak_accounting import disagreement
from soak_expected import expected
from soak_plans import LAB_WIDE, SHORT_FAULTS, Plan, covering_plans

sys.path.remove(str(REPO / "bench"))


def _fake_lab_exec(monkeypatch: pytest.MonkeyPatch, stdout: str, rc: int) -> None:
    done = subprocess.CompletedProcess([], rc, stdout, "slurm-lab: error: node 'node2' is not running")
    monkeypatch.setattr(_lab.subprocess, "run", lambda *a, **k: done)


@pytest.mark.parametrize("probe", ["job_pids", "temp_dirs", "containers"])
def test_a_probe_that_could_not_look_raises_and_is_a_violation(monkeypatch: pytest.MonkeyPatch, probe: str) -> None:
    _fake_lab_exec(monkeypatch, "", 2)  # the node did not answer: nothing printed, exit 2
    with pytest.raises(_lab.ProbeError, match="could not look: exit 2: slurm-lab: error: node 'node2'"):
        getattr(_lab, probe)("node2", 42)
    _fake_lab_exec(monkeypatch, "123\n", 0)  # cut short: no closing line
    with pytest.raises(_lab.ProbeError):
        getattr(_lab, probe)("node2", 42)
    [violation] = soak_shapes.left_on_nodes("42", "pyxis")
    assert violation.startswith("42: the ") and "could not look" in violation


def test_a_probe_that_looked_says_what_it_found(monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_lab_exec(monkeypatch, f"123\n456\n{_lab.DONE}\n", 0)
    assert _lab.job_pids("node1", 42) == ["123", "456"]
    _fake_lab_exec(monkeypatch, f"pyxis_42.0 pyxis_7.0\n{_lab.DONE}\n", 0)
    assert _lab.containers("node1", 42) == ["pyxis_42.0"]
    _fake_lab_exec(monkeypatch, f"{_lab.DONE}\n", 0)
    assert soak_shapes.left_on_nodes("42", "pyxis") == []


@pytest.mark.parametrize(
    "said, accounted, agrees",
    [
        ({"state": "COMPLETED", "exit_code": 0}, ("COMPLETED", "0:0"), True),
        ({"state": "FAILED", "exit_code": 1}, ("FAILED", "1:0"), True),
        ({"state": "CANCELLED", "exit_code": None}, ("CANCELLED", "0:15"), True),
        ({"state": "COMPLETED", "exit_code": 0}, ("PREEMPTED", "0:15"), True),  # the driver was done first
        ({"state": "FAILED", "exit_code": 1}, ("NODE_FAIL", "1:0"), True),
        ({"state": "COMPLETED", "exit_code": 0}, ("FAILED", "1:0"), False),
        ({"state": "COMPLETED", "exit_code": 1}, ("PREEMPTED", "0:15"), False),
        ({"state": "CANCELLED", "exit_code": None}, ("COMPLETED", "0:0"), False),
        ({"state": "FAILED", "exit_code": 1}, ("FAILED", "0:0"), False),
        ({"state": "FAILED", "exit_code": 1}, ("FAILED", "2:0"), False),
        ({"state": "COMPLETED", "exit_code": 0}, None, False),  # sacct never had its end
    ],
)
def test_status_that_disagrees_with_sacct_is_a_violation(said: dict, accounted: tuple | None, agrees: bool) -> None:
    why = disagreement(said, accounted)
    assert (why == "") is agrees, why


def test_the_summary_counts_landed_faults_per_class() -> None:
    outcomes = [
        soak.Outcome(Plan(0, 1, "none", "gcs_kill", 0.0), landed=True),
        soak.Outcome(Plan(1, 1, "none", "gcs_kill", 0.0), landed=False, violations=["missed"]),
        soak.Outcome(Plan(2, 1, "none", "preempt", 0.0), landed=True),
        soak.Outcome(Plan(3, 1, "none", "none", 0.0)),
    ]
    line = soak.summary(5, outcomes, ["a reader's command hung"])
    assert line == "soak: 4 jobs, 3 faults planned, 2 landed (gcs_kill: 1/2, preempt: 1/1), 2 violations (seed 5)"


@pytest.mark.parametrize("seed", [1, 7, 29, 1234])
def test_any_seeds_covering_plan_has_every_short_fault_the_lab_wide_last(seed: int) -> None:
    plan = covering_plans(seed, runtimes=("pyxis", "apptainer"))
    faults = [p.fault for p in plan]
    assert sorted(f for f in faults if f != "none") == sorted(SHORT_FAULTS) and faults.count("none") == 2
    assert [f for f in faults if f in LAB_WIDE] == faults[-len([f for f in faults if f in LAB_WIDE]) :]
    assert all(p.nodes >= 2 for p in plan if p.fault == "raylet_kill")  # a worker node's raylet to kill
    assert covering_plans(seed, runtimes=("pyxis",)) == covering_plans(seed, runtimes=("pyxis",))  # seeded


def test_the_soak_exits_1_on_a_violation(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    bad = soak.Outcome(Plan(0, 1, "none", "exception", 0.0), job_id="9", state="COMPLETED", violations=["wrong"])
    monkeypatch.setattr(soak, "soak", lambda *a, **k: ([bad], []))
    monkeypatch.setattr(sys, "argv", ["soak.py", "--seed", "3", "--cover"])
    with pytest.raises(SystemExit) as ended:
        soak.main()
    assert ended.value.code == 1
    assert capsys.readouterr().out.splitlines()[-1].endswith("1 violations (seed 3)")
    monkeypatch.setattr(soak, "soak", lambda *a, **k: ([soak.Outcome(Plan(0, 1, "none", "none", 0.0))], []))
    with pytest.raises(SystemExit) as ended:
        soak.main()
    assert ended.value.code == 0


def test_a_job_whose_cause_is_not_its_faults_is_a_violation(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The soak judges the one decision (core/ending.py) too: a driver exception called OOM,
    or a node failure that names another node, is wrong even where the words are right."""
    said = {"state": "FAILED", "exit_code": 1, "exit_reason": "driver exited 1"}
    right = {**said, "cause": {"kind": "driver_error", "node": ""}}
    assert expected("exception", 1, right, tmp_path, None) == []
    wrong = expected("exception", 1, {**said, "cause": {"kind": "oom", "node": "node1"}}, tmp_path, None)
    assert wrong == ["exception: FAILED with cause {'kind': 'oom', 'node': 'node1'}: not the fault's"]
    lost = {"state": "FAILED", "exit_code": 1, "exit_reason": "node2 lost: ...; then: stopped"}
    assert (
        expected("none", 2, {**lost, "cause": {"kind": "node_lost", "node": "node2"}}, tmp_path, ("node2", "failure"))
        == []
    )
    assert expected(
        "none", 2, {**lost, "cause": {"kind": "node_lost", "node": "node3"}}, tmp_path, ("node2", "failure")
    )
