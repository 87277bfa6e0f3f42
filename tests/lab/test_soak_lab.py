"""The chaos soak's engine (bench/soak.py, issue 59), short and seeded: six jobs two at a time,
bare and in containers, three of them hit by a fault (teardown while running, scancel during
bring-up, the driver SIGKILLed), `status` and `list` called in a loop meanwhile. Any violation
of an invariant fails the test, printed with the seed and the job that reproduce it. Long soaks
are the benchmark's (`python bench/soak.py --seed S --jobs 200`)."""

from __future__ import annotations

import sys

import pytest

from tests.conftest import REPO
from tests.lab.helpers import SPEC, SPEC_PYXIS

pytestmark = [pytest.mark.lab, pytest.mark.lab_shared, pytest.mark.timeout(600)]
SEED = 16  # its six jobs: 3 untouched, teardown_run, scancel_bringup, driver_kill; 2 in containers


def test_a_short_seeded_soak_keeps_every_invariant(pyxis_lab: list[str]) -> None:
    sys.path.insert(0, str(REPO / "bench"))
    try:
        import soak
    finally:
        sys.path.remove(str(REPO / "bench"))
    plan = soak.plans(SEED, 6, True)
    assert {p.fault for p in plan} == {"none", "teardown_run", "scancel_bringup", "driver_kill"}
    outcomes, problems = soak.soak(SEED, 6, 2, SPEC, SPEC_PYXIS)
    report = [f"{o.plan.describe(SEED)}: job {o.job_id} {o.state}: {v}" for o in outcomes for v in o.violations]
    line = soak.summary(SEED, outcomes, problems)
    print(line)
    assert not report and not problems, "\n".join([line, *report, *problems])
    assert line.startswith("soak: 6 jobs, 3 faults (") and line.endswith(" 0 violations (seed 16)")
