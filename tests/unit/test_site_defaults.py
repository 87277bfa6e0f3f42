"""One schema for the spec's site defaults (issue 78 item 3): an option marked ``spec=True`` in
core/options.py is the spec's field of the same name, with the option's type, checks and default,
and nothing declares it again (config/site_defaults.py). A new site default is its ``spec=True``
and a row of BAD here: the first test fails until the row exists."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from slurm_rl.config.site_defaults import SiteDefaults, site_default_names
from slurm_rl.config.spec import ClusterSpec, parse_spec
from slurm_rl.core.errors import SpecError
from slurm_rl.core.options import JobOptions
from slurm_rl.login.submission.resolve import resolve_options

pytestmark = pytest.mark.unit
BASE = {"cluster_name": "site", "fileroot": "/shared/srl"}

BAD = {  # site default -> a value the spec refuses: its option's own check, or a JSON type that is not the option's
    "python": "", "gpus_per_node": -1, "gpu_type": "a b", "gpu_request": "some", "cpus_per_node": 0,
    "partition": "a b", "account": "a b", "preflight": "yes", "on_bad_node": "maybe", "retry_on": "bogus",
    "heal": -1, "stall_timeout": "soon", "stall_action": "panic", "snapshot": 1, "dashboard": "true",
    "ray_client": 0, "head_partition": "a b", "qos": "a b", "constraint": "a b", "exclusive": "no",
    "segment": 0, "mem": "lots", "mem_per_cpu": "lots", "gres": "gpu 8", "reservation": "a b",
    "mail_type": "SOMETIMES", "mail_user": "a b", "sbatch_args": ["--nodes=3"], "srun_args": ["--nodes=3"],
}  # fmt: skip


def test_every_site_default_is_an_option_marked_so_and_has_a_row_here() -> None:
    assert sorted(site_default_names()) == sorted(BAD)
    shared = set(ClusterSpec.model_fields) & set(JobOptions.model_fields)
    assert shared == set(site_default_names()), "a spec field named as an option is that option's site default"
    assert set(SiteDefaults.model_fields) == shared
    assert not set(vars(ClusterSpec).get("__annotations__", {})) & shared, "a site default declared again by hand"


@pytest.mark.parametrize("name", sorted(BAD))
def test_a_bad_site_default_is_refused_at_load_as_its_flag_is(name: str) -> None:
    with pytest.raises(SpecError) as spec_error:
        parse_spec({**BASE, name: BAD[name]})
    line = str(spec_error.value)
    assert line.startswith(f"spec: {name}: ") and "\n" not in line, line
    value = tuple(BAD[name]) if isinstance(BAD[name], list) else BAD[name]
    try:
        JobOptions(**{name: value})
    except ValidationError as exc:  # the option's own check says the same
        said = exc.errors()[0]["msg"].removeprefix("Value error, ")
        assert said.split(" (got")[0] in line, (said, line)


def test_an_unset_site_default_reads_the_options_default_and_a_set_one_reaches_the_job(tmp_path: Path) -> None:
    spec = parse_spec(BASE)
    for name in site_default_names():
        expected = None if name == "python" else JobOptions.model_fields[name].default
        assert getattr(spec, name) == expected, name
    exp = tmp_path / "exp.py"
    exp.write_text("print(1)\n")
    site = parse_spec({**BASE, "qos": "high", "heal": 1, "sbatch_args": ["--licenses=fs:1"], "preflight": True})
    opts = resolve_options(site, str(exp), user="me", nodes=2, qos=None, sbatch_args=("--hint=nomultithread",))
    assert (opts.qos, opts.heal, opts.preflight) == ("high", 1, True)
    assert opts.sbatch_args == ("--licenses=fs:1", "--hint=nomultithread")  # the spec's, then the command line's
    assert resolve_options(site, str(exp), user="me", nodes=2, qos="low").qos == "low"  # a flag wins
