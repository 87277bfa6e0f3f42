"""One plan per submission (login/submission/plan.py): what `render` and `submit --dry-run` print is byte for
byte the script `submit` stages in the job dir, on every runtime, at a site whose Pyxis changes
the plan (container_scope=job: every container is named after its job, so the image cache is
off) too."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from slurm_rl.config.spec import load_spec_file
from slurm_rl.core.paths import JobPaths
from slurm_rl.login.submission.plan import preview_plan
from slurm_rl.login.submission.render import render_job
from slurm_rl.login.submission.resolve import resolve_options
from slurm_rl.login.submission.submit import submit
from slurm_rl.slurm import SlurmVersion
from slurm_rl.slurm.runner import Completed
from tests.conftest import REPO, run_cli

pytestmark = pytest.mark.unit
CONFIG = "Configuration data as of 2026-12-03T11:00:00\nPlugStackConfig         = {plugstack}\n"
SPECS = ["lab.json", "lab-pyxis.json", "lab-apptainer.json", "lab-gpu.json"]


class Site:
    """A SLURM site as preflight and submit ask it, whose Pyxis has ``scope``; sbatch keeps the
    script it was given (as the job dir holds it when sbatch reads it)."""

    def __init__(self, plugstack: Path) -> None:
        self.plugstack, self.staged = plugstack, ""

    def run(self, argv: list[str], timeout_s: float | None = None, check: bool = True, hint: str = "") -> Completed:
        assert list(argv[:3]) == ["scontrol", "show", "config"], argv
        return Completed(0, CONFIG.format(plugstack=self.plugstack), "")

    def version(self) -> SlurmVersion:
        return SlurmVersion.parse("slurm 24.11.5")

    def partition_nodes(self, partition: str | None) -> tuple[str, int]:
        return (partition or "lab", 8)

    def partition_capacity(self, partition: str | None) -> tuple[int, int, int] | None:
        return None

    def partition_time_limit(self, partition: str | None) -> str | None:
        return None

    def qos_limits(self, qos: str) -> None:
        return None

    def sbatch(self, script: str, hold: bool = False) -> int:
        self.staged = Path(script).read_text()
        return 4242


def pyxis_site(tmp_path: Path, scope: str) -> Path:
    plugstack = tmp_path / "plugstack.conf"
    plugstack.write_text(f"required /usr/local/lib/slurm/spank_pyxis.so runtime_path=/tmp/pyxis{scope}\n")
    return plugstack


@pytest.mark.parametrize("scope", ["", " container_scope=job"])
@pytest.mark.parametrize("name", SPECS)
def test_the_preview_is_the_script_submit_stages(tmp_path: Path, name: str, scope: str) -> None:
    image = tmp_path / "lab.sqsh"  # the lab's image path exists only where the lab was built
    image.write_bytes(b"hsqs")
    update = {"fileroot": str(tmp_path / "root"), "cpu_image": str(image), "gpu_image": str(image)}
    spec = load_spec_file(REPO / "cluster_specs" / name).model_copy(update=update)
    site = Site(pyxis_site(tmp_path, scope))
    opts = resolve_options(spec, str(REPO / "examples" / "hello.py"), user="alice", nodes=2)
    preview = render_job(preview_plan(spec, opts, site)).script  # type: ignore[arg-type]
    done = submit(spec, opts, site, release=False)  # type: ignore[arg-type]
    assert done.paths.job_dir == JobPaths.for_job(spec.fileroot, "alice", "hello", 4242).job_dir
    assert preview == site.staged == done.paths.sbatch_script.read_text()
    cached = "image_cache.sh" in preview  # the spec's image cache, as this site allows it
    assert cached is (spec.image_cache and spec.container_runtime == "pyxis" and not scope), name


def test_render_and_dry_run_print_the_same_plan_the_site_allows(tmp_path: Path) -> None:
    """Both commands ask the site (here a fake `scontrol` whose Pyxis has container_scope=job);
    where no SLURM is installed they print the spec's script and say so on stderr."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    config = CONFIG.format(plugstack=pyxis_site(tmp_path, " container_scope=job"))
    (bin_dir / "scontrol").write_text(f"#!/bin/sh\ncat <<'EOF'\n{config}EOF\n")
    (bin_dir / "scontrol").chmod(0o755)
    spec = str(REPO / "cluster_specs" / "lab-pyxis.json")
    args = (spec, "examples/hello.py", "--nodes", "2")
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}"}
    rendered = run_cli("render", *args, env=env, cwd=REPO)
    dry = run_cli("submit", *args, "--dry-run", env=env, cwd=REPO)
    assert rendered.returncode == dry.returncode == 0, rendered.stderr + dry.stderr
    assert rendered.stdout == dry.stdout and "image_cache.sh" not in rendered.stdout
    assert "container_scope=job" in rendered.stderr
    nowhere = {"PATH": f"{tmp_path / 'empty'}:{Path(sys.executable).parent}"}  # no SLURM command at all
    bare = run_cli("render", *args, env=nowhere, cwd=REPO)
    assert bare.returncode == 0 and "image_cache.sh" in bare.stdout, bare.stderr
    assert "`scontrol` is not installed" in bare.stderr and "the spec's as written" in bare.stderr
