"""One schema for the #SBATCH lines: a field of the options model marked ``directive=`` (core/options.py)
is the #SBATCH option of its flag's name, the job's own or its nodes', with no line written for
it anywhere else (login/submission/directives.py). A new sbatch option is its field and a row
here: the first test fails until the row exists."""

from __future__ import annotations

from pathlib import Path

import pytest

from slurm_rl.core.options import JobOptions
from slurm_rl.login.submission.directives import member_directives, sbatch_directives, sbatch_fields

pytestmark = pytest.mark.unit

SAMPLES = {  # field -> a value SLURM takes, and where the line goes
    "account": ("proj1", "job"),
    "qos": ("high", "job"),
    "reservation": ("maint", "job"),
    "dependency": ("afterok:12", "job"),
    "mail_type": ("END,FAIL", "job"),
    "mail_user": ("me@example.org", "job"),
    "comment": ("a run", "job"),
    "signal": ("B:USR2@300", "job"),
    "constraint": ("a100&ib", "nodes"),
    "segment": (2, "nodes"),
    "mem": ("64G", "nodes"),
    "mem_per_cpu": ("4G", "nodes"),
    "exclude": ("node9", "nodes"),
    "nodelist": ("node[1-2]", "nodes"),
}


def test_every_marked_field_has_a_row_here() -> None:
    marked = {**{f: "job" for f in sbatch_fields("job")}, **{f: "nodes" for f in sbatch_fields("nodes")}}
    assert marked == {f: scope for f, (_, scope) in SAMPLES.items()}


@pytest.mark.parametrize("field", sorted(SAMPLES))
def test_a_marked_field_is_its_sbatch_line(field: str) -> None:
    value, scope = SAMPLES[field]
    flag = sbatch_fields(scope)[field]
    extra = {"mem": None} if field == "mem_per_cpu" else {}
    nodes = 4 if field == "segment" else 2
    opts = JobOptions(experiment="/e.py", nodes=nodes, time="30", **{field: value, **extra})  # type: ignore[arg-type]
    lines = sbatch_directives(opts, Path("/r/e"))
    assert f"{flag}={value}" in lines or f"{flag}='{value}'" in lines, lines
    # with a head partition: the job's own lines go with the head's component, the nodes' with the workers'
    het = sbatch_directives(opts.replace(head_partition="cpu"), Path("/r/e"))
    at = next(i for i, line in enumerate(het) if line.startswith(f"{flag}="))
    assert (at < het.index("hetjob")) == (scope == "job"), het
    if scope == "nodes" and field not in ("segment", "nodelist"):  # a member's nodes are the job's kind
        assert any(line.startswith(f"{flag}=") for line in member_directives(opts, Path("/r/e")))
