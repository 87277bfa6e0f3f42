"""Jobs found by id (the per-user index and SLURM's output path), secrets kept out of every
file but one, and spec/flag values checked before they reach an #SBATCH line."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from slurm_rl.config.spec import parse_spec
from slurm_rl.core.errors import SpecError, UsageError
from slurm_rl.core.manifest import JobManifest
from slurm_rl.core.paths import JobPaths
from slurm_rl.login.reading import index
from slurm_rl.login.reading.lookup import all_job_dirs, find_job_dir
from slurm_rl.login.submission.plan import plan_job
from slurm_rl.login.submission.render import render_job
from slurm_rl.login.submission.resolve import JobOptions, resolve_options
from slurm_rl.login.submission.submit import stage_job_dir
from slurm_rl.slurm import Completed, SlurmClient


def _job(root: Path, job_id: int, name: str = "exp") -> JobPaths:
    paths = JobPaths.for_job(str(root), "alice", name, job_id)
    paths.job_dir.mkdir(parents=True)
    JobManifest(
        slurm_rl_version="t",
        cluster_name="c",
        name=name,
        user="alice",
        nodes=1,
        python="py",
        workdir="/",
        experiment_src_dir="/",
    ).write(paths.manifest)
    return paths


@pytest.fixture
def own_index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(index.INDEX_ENV, str(tmp_path / "index" / "jobs.jsonl"))
    return tmp_path


def test_a_job_is_found_by_id_from_the_index_whatever_its_spec(own_index: Path) -> None:
    a, b = _job(own_index / "siteA", 11), _job(own_index / "siteB", 12, "other")
    index.record(11, a, "siteA")
    index.record(12, b, "siteB")
    assert find_job_dir(11, "alice") == a and find_job_dir(12, "alice") == b
    assert [p.job_id for p in all_job_dirs("alice")] == ["12", "11"]  # newest first, both specs
    with pytest.raises(UsageError, match="job 13: no slurm-rl job dir found"):
        find_job_dir(13, "alice")
    assert stat.S_IMODE(index.index_path().stat().st_mode) == 0o600


def test_finding_one_job_looks_at_its_own_dir_only_however_long_the_index(
    own_index: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A user with years of jobs: `status JOB` reads the index once and checks one job dir (it
    checked all of them: 0.33 of 0.42 CPU-s per call with 3,700 jobs). A job whose dir is gone
    is still not found, and a resubmit's newer line wins."""
    gone = JobPaths.for_job(str(own_index / "old"), "alice", "exp", 1)
    for job_id in range(1000, 4000):
        index.record(job_id, gone, "site")  # dirs long removed
    old, new = _job(own_index / "siteA", 4001), _job(own_index / "siteB", 4001, "again")
    index.record(4001, old, "siteA")
    index.record(4001, new, "siteB")
    looked: list[Path] = []
    alive = index._alive
    monkeypatch.setattr(index, "_alive", lambda item: looked.append(Path(str(item["job_dir"]))) or alive(item))
    assert find_job_dir(4001, "alice") == new and looked == [new.job_dir]
    looked.clear()
    with pytest.raises(UsageError, match="job 1500: no slurm-rl job dir found"):
        find_job_dir(1500, "alice")
    assert looked == [gone.job_dir]  # its own entry only (and no sweep of that id: no task has it)


def test_list_shows_the_newest_fifty_and_says_how_many_more_there_are(own_index: Path) -> None:
    """`slurm-rl list` of a long history: the newest 50 (it rendered all, 3 s for 3,700 jobs),
    a line on stderr for the rest; -n N and --all ask for more."""
    import os
    import time

    from click.testing import CliRunner

    from slurm_rl.login.commands.job_cmds import list_jobs

    for k in range(53):  # local runs: their states come from their files, not SLURM
        paths = _job(own_index / "site", f"local-{k:03d}", f"run{k:03d}")
        os.utime(paths.manifest, (time.time() - 1000 + k,) * 2)  # newest: the highest k
        index.record(paths.job_id, paths, "site")
    runner = CliRunner()
    laptop = {"COLUMNS": "120", "PATH": "/nonexistent"}  # local runs only: listed without SLURM installed
    res = runner.invoke(list_jobs, [], env=laptop)
    ids = [line.split()[0] for line in res.stdout.splitlines()[1:] if line.startswith("local-")]
    assert res.exit_code == 0 and len(ids) == 50 and ids[0] == "local-052" and ids[-1] == "local-003", res.stdout
    assert "(3 older job(s) not shown: `slurm-rl list --all` or `-n N`)" in res.stderr
    few = runner.invoke(list_jobs, ["-n", "2"], env={"COLUMNS": "120"})
    shown = [ln.split()[0] for ln in few.stdout.splitlines() if ln.startswith("local-")]
    assert shown == ["local-052", "local-051"], few.stdout
    every = runner.invoke(list_jobs, ["--all"], env={"COLUMNS": "120"})
    assert sum(ln.startswith("local-") for ln in every.stdout.splitlines()) == 53 and "not shown" not in every.stderr
    assert runner.invoke(list_jobs, ["-n", "0"]).exit_code == 2


def test_a_job_is_found_from_slurms_record_of_its_output(own_index: Path) -> None:
    paths = _job(own_index / "site", 77)
    out = f"JobId=77 JobState=RUNNING StdOut={paths.batch_log} StdErr={paths.batch_log}\n"
    client = SlurmClient(lambda argv, t: Completed(0, out, ""))
    assert find_job_dir(77, "alice", client) == paths
    assert client.calls == 1


def test_an_unwritable_index_never_fails_a_submit(own_index: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(index.INDEX_ENV, "/proc/nope/jobs.jsonl")
    index.record(1, _job(own_index, 1), "c")  # no exception
    assert index.entries() == []


def test_secret_env_stays_out_of_script_spec_record_and_manifest(tmp_path: Path) -> None:
    secret = "hunter2-value"
    spec = parse_spec(
        {
            "cluster_name": "c",
            "fileroot": str(tmp_path),
            "env": {"HF_TOKEN": secret, "WANDB_API_KEY": secret, "LOG_LEVEL": "info"},
        }
    )
    assert set(spec.secret_env) == {"HF_TOKEN", "WANDB_API_KEY"} and spec.public_env == {"LOG_LEVEL": "info"}
    exp = tmp_path / "e.py"
    exp.write_text("")
    opts = JobOptions(experiment=str(exp), user="alice", name="n")
    job = render_job(plan_job(spec, opts))
    stage = JobPaths(tmp_path / "stage")
    stage_job_dir(stage, spec, opts, job)
    assert secret not in job.script and secret not in job.manifest.to_json()
    assert "LOG_LEVEL=info" in job.script and "secrets.env" in job.script
    for f in stage.job_dir.rglob("*"):
        if f.is_file() and f != stage.secrets:
            assert secret not in f.read_text(), f
    assert f"HF_TOKEN={secret}" in stage.secrets.read_text()
    assert stat.S_IMODE(stage.secrets.stat().st_mode) == 0o600
    assert stat.S_IMODE(stage.job_dir.stat().st_mode) == 0o700


@pytest.mark.parametrize(
    ("field", "value", "needle"),
    [
        ("fileroot", "/lustre/../tmp/srl", "write the path without it, e.g. '/tmp/srl'"),
        ("partition", "gpu;reboot", "partition"),
        ("account", "my account", "account"),
    ],
)
def test_spec_values_that_would_reach_sbatch_are_checked(tmp_path: Path, field: str, value: str, needle: str) -> None:
    with pytest.raises(SpecError, match=needle) as err:
        parse_spec({"cluster_name": "c", "fileroot": str(tmp_path), field: value})
    assert field in str(err.value) and len(str(err.value).splitlines()) == 1
    assert parse_spec({"cluster_name": "c", "fileroot": str(tmp_path), "partition": "gpu,gpu-long"}).partition


def test_flags_that_would_reach_sbatch_are_checked(tmp_path: Path) -> None:
    spec = parse_spec({"cluster_name": "c", "fileroot": str(tmp_path)})
    for flags, needle in (({"partition": "a b"}, "--partition"), ({"account": "x$(id)"}, "--account")):
        with pytest.raises(UsageError, match=needle):
            resolve_options(spec, None, user="alice", **flags)
    assert resolve_options(spec, None, user="alice").experiment == ""  # no experiment: interactive


def test_partitions_are_read_from_one_sinfo_call() -> None:
    # `sinfo -h -N -o %P|%n|%c|%m|%G` as SLURM 22.05 prints it: a line per node and partition
    out = (
        "lab*|node1|2|1|(null)\nlab*|node2|2|1|(null)\nlab*|node3|2|1|(null)\n"
        "gpu|g1|64|512000|gpu:a100:8(S:0-1)\ngpu|g2|64|512000|gpu:a100:8(S:0-1)\n"
        "gpu|g3|32|256000|gpu:4\ngpu|g4|32|256000+|gpu:4\n"
    )
    client = SlurmClient(lambda argv, t: Completed(0, out, ""))
    assert client.partition_nodes(None) == ("lab", 3)
    assert client.partition_nodes("gpu") == ("gpu", 4)
    assert client.partition_nodes("nope") is None
    assert client.partition_capacity("gpu") == (64, 512000, 8) and client.partition_capacity(None) == (2, 1, 0)
    assert client.calls == 1


def test_node_and_gpu_types_become_ray_resources() -> None:
    m = JobManifest(
        slurm_rl_version="t",
        cluster_name="c",
        name="n",
        user="u",
        nodes=1,
        python="py",
        workdir="/",
        experiment_src_dir="/",
        node_type_from_node_name={r"gpu\d+": "gpu", r"cpu\d+": "cpu"},
        gpu_type_from_node_name={r"gpu0[1-4]": "a100", r"gpu\d+": "h100"},
    )
    assert m.type_resources("gpu02", 8) == {"node_type:gpu": 1, "gpu_type:a100": 8}
    assert m.type_resources("gpu12", 4) == {"node_type:gpu": 1, "gpu_type:h100": 4}
    assert m.type_resources("cpu1", 0) == {"node_type:cpu": 1}
    assert m.type_resources("login", 0) == {}
