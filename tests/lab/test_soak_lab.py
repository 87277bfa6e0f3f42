"""The chaos soak's engine (bench/soak.py, issue 59), short and seeded, on a plan built to cover
every fault class that lands within 30 s (bench/soak_plans.py: ``covering_plans``): one job per
class and two untouched, bare, under Pyxis and under Apptainer, three at a time, the preemption
last and alone; `status`, `list` and `logs` called in a loop meanwhile. Every fault must land,
every job's `status` agree with the fault and with `sacct`, and nothing of any job stay on a
node; any violation fails the test, printed with the seed and the job that reproduce it. Not
shared with the other stream: a preemption cancels every lower-tier job on its node, another
test's too. Long soaks are the benchmark's (`python bench/soak.py --seed S --jobs 200`)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.lab.helpers import SPEC, SPEC_APPTAINER, SPEC_PYXIS, apptainer_missing

pytestmark = [pytest.mark.lab, pytest.mark.timeout(600)]
SEED = 29


def test_a_short_seeded_soak_lands_every_short_fault_and_keeps_every_invariant(pyxis_lab: list[str]) -> None:
    sys.path.insert(0, str(REPO / "bench"))
    try:
        import soak
        from soak_plans import SHORT_FAULTS
    finally:
        sys.path.remove(str(REPO / "bench"))
    apptainer = None if apptainer_missing() else Path(SPEC_APPTAINER)
    outcomes, problems = soak.soak(
        SEED, 0, 3, Path(SPEC), Path(SPEC_PYXIS), apptainer, faults=SHORT_FAULTS, cover=True,
        user=os.environ.get("SLURM_RL_TEST_USER"),  # the suite's user (README); root injects the faults
    )  # fmt: skip
    report = [f"{o.plan.describe(SEED)}: job {o.job_id} {o.state}: {v}" for o in outcomes for v in o.violations]
    line = soak.summary(SEED, outcomes, problems)
    print(line)
    assert not report and not problems, "\n".join([line, *report, *problems])
    n = len(SHORT_FAULTS)
    assert line.startswith(f"soak: {n + 2} jobs, {n} faults planned, {n} landed ("), line
    assert line.endswith(" 0 violations (seed 29)"), line
    assert {o.plan.runtime for o in outcomes} >= {"none", "pyxis"}, "bare and container jobs"
