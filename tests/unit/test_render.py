"""Render: golden files (byte for byte), quoting of awkward values, determinism, --dry-run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from slurm_rl.config.spec import load_spec_file, parse_spec
from slurm_rl.core.manifest import load_manifest
from slurm_rl.login.cli import cli
from slurm_rl.login.submission.plan import plan_job
from slurm_rl.login.submission.render import render_job, render_sbatch
from slurm_rl.login.submission.resolve import JobOptions, resolve_options

REPO = Path(__file__).resolve().parents[2]
GOLDEN = REPO / "tests" / "golden"

BASE_OPTS = JobOptions(
    experiment="/home/alice/rl/experiment.py",
    experiment_args=("--lr", "3e-4", "a b"),
    nodes=4,
    name="grpo",
    user="alice",
    workdir="/home/alice/rl",
    python="/shared/venv/bin/python",
)

CASES = {
    "lab": (REPO / "cluster_specs" / "lab.json", BASE_OPTS.replace(nodes=3, time="0:10:00")),
    # in a container the driver runs in the job dir unless a mounted --workdir is asked for
    "pyxis": (REPO / "cluster_specs" / "example-pyxis.json", BASE_OPTS.replace(gpus_per_node=8, workdir="")),
    # a squashfs image: every node prepares it once (the image cache), containers start from it
    "pyxis-sqsh": (
        REPO / "cluster_specs" / "example-pyxis.json",
        BASE_OPTS.replace(gpus_per_node=8, workdir="", container_image="/lustre/images/rl 2026.sqsh"),
    ),
    "apptainer": (
        REPO / "cluster_specs" / "example-apptainer.json",
        BASE_OPTS.replace(gpus_per_node=4, port_base=20000, workdir="/scratch/alice/rl"),
    ),
    "none-setup": (None, BASE_OPTS.replace(oversubscribe=True, account="acct", partition="debug")),
    # a CPU head on its own partition: one heterogeneous job (head component, hetjob, workers)
    "hetjob": (
        REPO / "cluster_specs" / "example-pyxis.json",
        BASE_OPTS.replace(
            gpus_per_node=8, nodes=2, time="1:00:00", head_node="cpu", head_partition="cpu", workdir="/lustre/alice"
        ),
    ),
    # a sweep's tasks (a job array) in containers: the job dir is <array>_<task> everywhere
    "sweep-pyxis": (
        REPO / "cluster_specs" / "example-pyxis.json",
        BASE_OPTS.replace(gpus_per_node=8, nodes=2, workdir="", array="0-3%2"),
    ),
    # a later job of a chain: the run dir it shares, the chain's end in finalize
    "chain": (
        REPO / "cluster_specs" / "lab.json",
        BASE_OPTS.replace(nodes=2, time="4:00:00", chain=3, run_dir="/var/tmp/slurm-rl/alice/grpo/4711"),
    ),
}


def _spec(path: Path | None):  # type: ignore[no-untyped-def]
    if path is not None:
        return load_spec_file(path)
    return parse_spec(
        {
            "cluster_name": "plain",
            "fileroot": "/nfs/srl",
            "setup": ["module load cuda", "source /nfs/env.sh"],
            "env": {"B_VAR": "two words", "A_VAR": "it's"},
            "cpus_per_node": 8,
        }
    )


def _resolved(spec, opts: JobOptions, tmp_path: Path) -> JobOptions:  # type: ignore[no-untyped-def]
    """Resolve flags against the spec as `submit` does, then pin the machine-specific paths."""
    exp = tmp_path / "experiment.py"
    exp.write_text("")
    got = resolve_options(
        spec,
        str(exp),
        experiment_args=opts.experiment_args,
        nodes=opts.nodes,
        name=opts.name,
        user=opts.user,
        gpus_per_node=opts.gpus_per_node,
        time=opts.time,
        partition=opts.partition,
        account=opts.account,
        port_base=opts.port_base,
        oversubscribe=opts.oversubscribe,
        python=opts.python,
        head_node=opts.head_node,
        head_partition=opts.head_partition,
    )
    return got.replace(
        experiment=opts.experiment,
        workdir=opts.workdir,
        array=opts.array,
        chain=opts.chain,
        run_dir=opts.run_dir,
        container_image=opts.container_image,
    )


@pytest.mark.parametrize("case", sorted(CASES))
def test_golden(case: str, update_goldens: bool, tmp_path: Path) -> None:
    spec_path, opts = CASES[case]
    spec = _spec(spec_path)
    text = render_sbatch(plan_job(spec, _resolved(spec, opts, tmp_path)))
    golden = GOLDEN / f"{case}.sbatch"
    if update_goldens:
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(text)
    assert golden.exists(), f"missing golden file {golden}; run pytest --update-goldens and review the diff"
    assert text == golden.read_text()


def test_render_is_deterministic() -> None:
    spec_path, opts = CASES["pyxis"]
    assert render_sbatch(plan_job(_spec(spec_path), opts)) == render_sbatch(plan_job(_spec(spec_path), opts))


def test_pyxis_flags(tmp_path: Path) -> None:
    spec_path, opts = CASES["pyxis"]
    spec = _spec(spec_path)
    opts = _resolved(spec, opts, tmp_path)
    text = render_sbatch(plan_job(spec, opts))
    assert "#SBATCH --partition=batch" in text and "#SBATCH --account=my-account" in text
    for flag in (
        "--container-image=nvcr.io/nvidia/pytorch:25.01-py3",
        # the fileroot (job dirs) and the node-local dir (Ray's temp dir: enroot's /tmp is RAM)
        "--container-mounts=/lustre:/lustre,/home/datasets:/datasets:ro,/lustre/fsw/slurm_rl:/lustre/fsw/slurm_rl,"
        "/tmp:/tmp",
        "--no-container-mount-home",
        '--container-workdir="/lustre/fsw/slurm_rl/alice/grpo/$SLURM_JOB_ID"',
        "#SBATCH --gpus-per-node=8",
    ):
        assert flag in text
    # unnamed: pyxis removes it when the step ends (a named one outlives the job under scope=global)
    assert "--container-name" not in text
    # nothing runs on the bare node with python: finalize is shell
    assert "-m slurm_rl.job.finalize" not in text and "slurm_rl_finalize" in text
    # --container-image on the command line wins over the spec's image
    text = render_sbatch(plan_job(_spec(spec_path), opts.replace(container_image="my/img:1")))
    assert "--container-image=my/img:1" in text


def test_a_squashfs_image_is_cached_unless_the_spec_says_not(tmp_path: Path) -> None:
    spec_path, opts = CASES["pyxis-sqsh"]
    spec = _spec(spec_path)
    text = render_sbatch(plan_job(spec, opts))
    # the prepare step, then the container step names the prepared copy (pyxis reuses it)
    assert "container/image_cache.sh prepare" in text and '"${slurm_rl_image_flags[@]}"' in text
    assert "slurm_rl_image='/lustre/images/rl 2026.sqsh'" in text
    assert f" {int(spec.image_cache_gb * 1024)} /tmp/slurm-rl-images " in text
    off = spec.model_copy(update={"image_cache": False})
    assert "image_cache.sh" not in render_sbatch(plan_job(off, opts)) and "--container-name" not in render_sbatch(
        plan_job(off, opts)
    )
    # a registry image is pyxis' to import: no cache
    assert "image_cache.sh" not in render_sbatch(
        plan_job(spec, opts.replace(container_image="nvcr.io/nvidia/pytorch:25.01-py3"))
    )


AWKWARD = ["a'; echo INJECTED; '", 'with space/and "quotes"', "new\nline", "$(touch /tmp/pwned)", "back\\slash"]


@pytest.mark.parametrize("awkward", AWKWARD)
def test_awkward_values_survive_the_shell(tmp_path: Path, awkward: str) -> None:
    """Run the rendered script with a fake srun: every value arrives byte for byte."""
    workdir = tmp_path / f"work {awkward}"
    workdir.mkdir(parents=True)
    spec = parse_spec(
        {"cluster_name": "c", "fileroot": str(tmp_path / "root"), "env": {"AWK": awkward}, "setup": ["true"]}
    )
    opts = BASE_OPTS.replace(
        experiment=str(workdir / "exp.py"),
        workdir=str(workdir),
        experiment_args=(awkward, "--x"),
        python=sys.executable,
        name="n",
    )
    script = tmp_path / "sbatch.sh"
    script.write_text(render_sbatch(plan_job(spec, opts)))
    fakebin = tmp_path / "bin"
    fakebin.mkdir()
    dump = tmp_path / "dump.json"
    (fakebin / "srun").write_text(
        "#!/usr/bin/env python3\nimport json, os, sys\n"
        f"json.dump({{'argv': sys.argv[1:], 'env': dict(os.environ)}}, open({str(dump)!r}, 'w'))\n"
    )
    (fakebin / "srun").chmod(0o755)
    env = {"PATH": f"{fakebin}:{os.environ['PATH']}", "SLURM_JOB_ID": "42", "HOME": str(tmp_path)}
    res = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, timeout=30, check=False)
    assert "INJECTED" not in res.stdout + res.stderr
    assert not Path("/tmp/pwned").exists()
    got = json.loads(dump.read_text())
    assert got["env"]["AWK"] == awkward
    # options reach the nodes through the manifest, byte for byte
    render_job(plan_job(spec, opts)).manifest.write(tmp_path / "manifest.json")
    manifest = load_manifest(tmp_path / "manifest.json")
    assert manifest.workdir == str(workdir)
    assert manifest.experiment_args == (awkward, "--x")
    assert got["env"]["SLURM_RL_JOB_DIR"] == str(tmp_path / "root" / "alice" / "n" / "42")
    # the node script itself parses
    assert got["argv"][-3:-1] == ["bash", "-c"]
    node_script = got["argv"][-1]
    assert subprocess.run(["bash", "-n", "-c", node_script], check=False).returncode == 0


def test_dry_run_prints_what_render_prints(tmp_path: Path) -> None:
    exp = tmp_path / "exp.py"
    exp.write_text("print('hi')\n")
    spec = str(REPO / "cluster_specs" / "lab.json")
    a = CliRunner().invoke(cli, ["render", spec, str(exp), "-N", "2"])
    b = CliRunner().invoke(cli, ["submit", spec, str(exp), "-N", "2", "--dry-run"])
    assert a.exit_code == 0 and b.exit_code == 0, (a.output, b.output)
    assert a.stdout == b.stdout and "#SBATCH --nodes=2" in a.stdout


@pytest.mark.parametrize(
    ("flags", "needle"),
    [
        (["-N", "0"], "--nodes"),
        (["--time", "soon"], "--time"),
        (["--gpus-per-node", "-2"], "--gpus-per-node"),
        (["--name", "bad name"], "--name"),
        (["--port-base", "80"], "--port-base"),
        (["--container-image", "x"], "container_runtime"),
    ],
)
def test_bad_flags_exit_2(tmp_path: Path, flags: list[str], needle: str) -> None:
    exp = tmp_path / "exp.py"
    exp.write_text("")
    res = CliRunner().invoke(cli, ["submit", str(REPO / "cluster_specs" / "lab.json"), str(exp), "--dry-run", *flags])
    assert res.exit_code == 2, res.output
    assert needle in res.stderr and len(res.stderr.strip().splitlines()) == 1


def test_missing_experiment_exit_2() -> None:
    res = CliRunner().invoke(cli, ["submit", str(REPO / "cluster_specs" / "lab.json"), "/nope/exp.py", "--dry-run"])
    assert res.exit_code == 2 and "does not exist" in res.stderr
