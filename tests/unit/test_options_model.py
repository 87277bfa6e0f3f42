"""One options model: the click flags follow from JobOptions, the spec fills what a flag leaves
unset, the manifest is the same model, and the job's environment is read in one place."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from slurm_rl.config.spec import parse_spec
from slurm_rl.core.errors import UsageError
from slurm_rl.core.job_env import JobEnvironment
from slurm_rl.core.manifest import JobManifest
from slurm_rl.core.options import DEFAULT_SIGNAL, JobOptions
from slurm_rl.login.cli import cli
from slurm_rl.login.submission.flags import flag_fields
from slurm_rl.login.submission.resolve import resolve_options

SPEC = {"cluster_name": "c", "fileroot": "/shared/srl"}


@pytest.mark.parametrize("command", ["submit", "render"])
def test_every_option_field_is_a_flag_with_the_models_default(command: str) -> None:
    params = {p.name: p for p in cli.commands[command].params}
    for name, meta in flag_fields().items():
        assert name in params, f"JobOptions.{name} has no --flag on `slurm-rl {command}`"
        assert params[name].opts[-1] == meta["flags"][-1]
        assert params[name].default is None  # unset: the spec, then the model, decide
        if meta["default"] not in (None, "", False, 0, ()):
            assert f"[default: {meta['default']}]" in (params[name].help or "")
    help_text = CliRunner().invoke(cli, [command, "--help"], terminal_width=200).output
    assert all(meta["flags"][-1] in help_text for meta in flag_fields().values())


def test_flag_beats_spec_beats_model_default(tmp_path: Path) -> None:
    exp = tmp_path / "exp.py"
    exp.write_text("print('hi')\n")
    spec = parse_spec({**SPEC, "partition": "gpu", "account": "acct", "cpus_per_node": 8})
    opts = resolve_options(spec, str(exp), user="u")
    assert (opts.partition, opts.account, opts.cpus_per_node, opts.signal) == ("gpu", "acct", 8, DEFAULT_SIGNAL)
    opts = resolve_options(spec, str(exp), user="u", partition="debug", cpus_per_node=2)
    assert (opts.partition, opts.cpus_per_node, opts.name) == ("debug", 2, "exp")


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        ({"nodes": 0}, "--nodes 0: must be >= 1"),
        ({"time": "soon"}, "--time 'soon': Value is not a SLURM time"),
        ({"partition": "a b"}, "--partition 'a b': Value has characters SLURM does not allow"),
        ({"signal": "B:USR1@60"}, "--signal 'B:USR1@60': USR1 is taken by NCCL"),
        ({"min_nodes": 5, "nodes": 2}, "--min-nodes 5: must be 1..2"),
        ({"port_base": 80}, "--port-base 80: must be 1024.."),
        ({"head_node": "gpu"}, "--head-node 'gpu'"),
        ({"no_such_option": 1}, "unknown job option 'no_such_option'"),
    ],
)
def test_bad_options_name_the_flag(flags: dict[str, object], message: str) -> None:
    with pytest.raises(UsageError) as err:
        resolve_options(parse_spec(SPEC), None, user="u", **flags)
    assert str(err.value).startswith(message.split(": Value")[0]) and message.split("Value ")[-1] in str(err.value)


@pytest.mark.parametrize("no_limit", ["0", "00:00:00", "UNLIMITED", "infinite"])
def test_a_time_of_zero_or_unlimited_asks_for_no_limit_and_keeps_the_default_warning(no_limit: str) -> None:
    """sbatch reads a time limit of zero (or UNLIMITED, INFINITE) as none of the job's own; the
    default warning then comes 120 s before whatever limit applies, and nothing blames --signal."""
    opts = resolve_options(parse_spec(SPEC), None, user="u", time=no_limit)
    assert (opts.time, opts.signal) == (no_limit, DEFAULT_SIGNAL)
    from slurm_rl.core.fields import human_time_limit

    assert human_time_limit(no_limit) == human_time_limit(None) == "the partition's limit"
    assert human_time_limit("0:30") == "1 min: SLURM rounds --time 0:30 up to whole minutes"


def test_the_manifest_is_the_options_plus_what_submit_adds() -> None:
    opts = JobOptions(nodes=2, head_node="cpu", partition="p", time="10")
    manifest = JobManifest(**opts.model_dump(), slurm_rl_version="0", cluster_name="c")
    assert manifest.total_nodes == 3 and manifest.partition == "p" and manifest.interactive
    again = JobManifest.model_validate(json.loads(manifest.to_json()))
    assert again == manifest
    assert set(JobOptions.model_fields) < set(JobManifest.model_fields)


def test_a_head_partition_makes_a_cpu_head() -> None:
    opts = JobOptions(nodes=2, head_partition="cpu")
    assert opts.head_node == "cpu" and opts.heterogeneous and opts.total_nodes == 3


def test_job_environment_reads_slurm_and_slurm_rl_variables() -> None:
    env = JobEnvironment.current(
        {
            "SLURM_JOB_ID": "42",
            "SLURM_RESTART_COUNT": "2",
            "SLURM_RL_JOB_DIR": "/f/u/exp/42",
            "SLURMD_NODENAME": "node2",
            "SLURM_NODEID": "1",
            "SLURM_JOB_NODELIST": "node[1-3]",
            "SLURM_CPUS_ON_NODE": "4",
            "CUDA_VISIBLE_DEVICES": "0,1",
        }
    )
    assert (env.job_id, env.attempt, env.job_dir, env.node) == ("42", 2, Path("/f/u/exp/42"), "node2")
    assert env.in_slurm_rl_job and env.nodes_and_rank() == (["node1", "node2", "node3"], 1)
    assert env.cpus_on_node == 4 and env.gpu_count() == 2
    bare = JobEnvironment.current({"SLURM_RESTART_COUNT": ""})
    assert bare.attempt == 0 and not bare.in_slurm_job and bare.job_dir is None


def test_the_cli_starts_without_torch_ray_or_matplotlib() -> None:
    code = (
        "import sys, slurm_rl.login.cli; print(sorted(m for m in ('torch', 'ray', 'matplotlib') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]"


def test_forgetting_init_ray_says_what_to_call() -> None:
    code = (
        "from slurm_rl.distributed import RayVirtualCluster\n"
        "try:\n    RayVirtualCluster([1], use_gpus=False)\nexcept RuntimeError as e:\n    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert "call slurm_rl.distributed.init_ray() first" in out.stdout and "not ray.init()" in out.stdout, out
