"""The chaos soak's engine (bench/soak.py, issue 59), short and seeded: six jobs two at a time,
bare, under Pyxis and under Apptainer (where the lab has them), three of them hit by a fault
(teardown while running, the head's GCS and a worker node's raylet SIGKILLed), `status` and
`list` called in a loop meanwhile. Any violation of an invariant fails the test, printed with
the seed and the job that reproduce it. Long soaks are the benchmark's (`python bench/soak.py
--seed S --jobs 200`)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.lab.helpers import SPEC, SPEC_APPTAINER, SPEC_PYXIS, apptainer_missing

pytestmark = [pytest.mark.lab, pytest.mark.lab_shared, pytest.mark.timeout(600)]
SEED = 29  # 3 untouched, teardown_run (bare), gcs_kill (3 nodes), raylet_kill (3 nodes, node3's)


def test_a_short_seeded_soak_keeps_every_invariant(pyxis_lab: list[str]) -> None:
    sys.path.insert(0, str(REPO / "bench"))
    try:
        import soak
    finally:
        sys.path.remove(str(REPO / "bench"))
    apptainer = None if apptainer_missing() else Path(SPEC_APPTAINER)
    runtimes = ("pyxis", "apptainer") if apptainer else ("pyxis",)
    plan = soak.plans(SEED, 6, runtimes)
    assert {p.fault for p in plan} == {"none", "teardown_run", "gcs_kill", "raylet_kill"}
    assert [p.nodes for p in plan if p.fault.endswith("_kill")] == [3, 3]
    outcomes, problems = soak.soak(SEED, 6, 2, Path(SPEC), Path(SPEC_PYXIS), apptainer)
    report = [f"{o.plan.describe(SEED)}: job {o.job_id} {o.state}: {v}" for o in outcomes for v in o.violations]
    line = soak.summary(SEED, outcomes, problems)
    print(line)
    assert not report and not problems, "\n".join([line, *report, *problems])
    assert line.startswith("soak: 6 jobs, 3 faults (") and line.endswith(" 0 violations (seed 29)")
