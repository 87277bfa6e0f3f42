"""The sbatch options sites require, an escape hatch for the rest, and mistakes refused before
the queue wait (exit 2, one line, nothing submitted)."""

from __future__ import annotations

from pathlib import Path

import pytest

from slurm_rl.config.spec import parse_spec
from slurm_rl.core.errors import SlurmCommandError, UsageError
from slurm_rl.core.manifest import JobManifest
from slurm_rl.core.paths import JobPaths
from slurm_rl.login.submission.plan import plan_job
from slurm_rl.login.submission.render import render_sbatch
from slurm_rl.login.submission.resolve import resolve_options
from slurm_rl.login.submission.submit import submit
from slurm_rl.login.teardown import site_flags
from slurm_rl.slurm import QosLimits, SlurmVersion, parse_tres
from tests.conftest import REPO, run_cli

SPEC = {"cluster_name": "site", "fileroot": "/shared/srl", "partition": "gpu", "account": "proj"}
SITE = [
    "--qos", "high", "-C", "a100&ib", "--exclusive", "--mem", "64G", "--gres", "gpu:8", "--reservation", "r1",
    "-x", "gpu9", "-w", "gpu[1-2]", "-d", "afterok:12", "--mail-type", "END,FAIL", "--mail-user", "a@b.c",
    "--comment", "my run", "--sbatch-arg=--licenses=fs:1", "--srun-arg=--mpi=none",
]  # fmt: skip


def _opts(tmp_path: Path, spec: dict | None = None, **flags: object):  # type: ignore[no-untyped-def]
    exp = tmp_path / "exp.py"
    exp.write_text("print('hi')\n")
    flags.setdefault("workdir", str(REPO))
    return resolve_options(parse_spec({**SPEC, **(spec or {})}), str(exp), user="u", **flags)


def test_site_options_reach_the_script_spelled_as_sbatch_spells_them(tmp_path: Path) -> None:
    spec = tmp_path / "site.json"
    spec.write_text('{"cluster_name": "site", "fileroot": "/shared/srl", "partition": "gpu"}')
    res = run_cli("render", str(spec), "examples/hello.py", "-N", "2", *SITE, cwd=REPO)
    assert res.returncode == 0, res.stderr
    for line in ("--qos=high", "--constraint='a100&ib'", "--exclusive", "--mem=64G", "--gres=gpu:8",
                 "--reservation=r1", "--exclude=gpu9", "--nodelist='gpu[1-2]'", "--dependency=afterok:12",
                 "--mail-type=END,FAIL", "--mail-user=a@b.c", "--comment='my run'", "--licenses=fs:1"):  # fmt: skip
        assert f"#SBATCH {line}\n" in res.stdout, line
    assert "    --mpi=none \\\n" in res.stdout  # the node step's srun


def test_with_a_cpu_head_node_options_go_to_the_workers_and_job_options_to_the_job(tmp_path: Path) -> None:
    opts = _opts(tmp_path, nodes=2, head_partition="cpu", constraint="a100", mem="64G", qos="high", exclusive=True)
    script = render_sbatch(plan_job(parse_spec(SPEC), opts))
    head, workers = script.split("#SBATCH hetjob\n")
    assert "--qos=high" in head and "--constraint" not in head and "--mem=" not in head
    assert "--constraint=a100" in workers and "--mem=64G" in workers and "--exclusive" in workers


def test_the_spec_sets_site_defaults_and_escape_hatch_arguments_add_up(tmp_path: Path) -> None:
    opts = _opts(tmp_path, {"qos": "normal", "sbatch_args": ["--licenses=fs:1"]}, sbatch_args=("--power=low",))
    assert opts.qos == "normal" and opts.sbatch_args == ("--licenses=fs:1", "--power=low")
    assert _opts(tmp_path, {"qos": "normal"}, qos="high").qos == "high"


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        ({"sbatch_args": ("--ntasks-per-node=4",)}, "slurm-rl runs one task per node"),
        ({"sbatch_args": ("--output=/tmp/x",)}, "logs go to the job dir's logs/"),
        ({"sbatch_args": ("--qos=high",)}, "'--qos=high': slurm-rl has a flag for this; use --qos high instead"),
        ({"sbatch_args": ("--comment=x",)}, "'--comment=x': slurm-rl has a flag for this; use --comment x instead"),
        ({"sbatch_args": ("-c",)}, "use --cpus-per-node instead"),
        ({"sbatch_args": ("--requeue",)}, "use --requeue N instead"),
        ({"sbatch_args": ("--nodes=4",)}, "would break the job as slurm-rl runs it: the manifest counts the nodes"),
        ({"sbatch_args": ("--output=/tmp/x",)}, "would break the job as slurm-rl runs it: logs go to"),
        ({"sbatch_args": ("licenses=fs:1",)}, "must start with '-'"),
        ({"srun_args": ("--ntasks=8",)}, "one task on every node"),
        ({"mem": "64G", "mem_per_cpu": "4G"}, "--mem-per-cpu 4G: contradicts --mem"),
        ({"exclusive": True, "oversubscribe": True}, "--oversubscribe True: contradicts --exclusive"),
        ({"nodelist": "gpu[1-3]", "nodes": 2}, "names 3 nodes but --nodes is 2"),
        ({"nodelist": "gpu[1-2]", "exclude": "gpu2", "nodes": 2}, "and --exclude both name gpu2"),
        ({"mem": "lots"}, "--mem 'lots': is not a SLURM memory size"),
        ({"mail_type": "SOMETIMES"}, "'SOMETIMES' is not a mail type"),
        ({"nodelist": "gpu[1-"}, "--nodelist 'gpu[1-'"),
    ],
)
def test_bad_site_options_are_one_line_naming_the_flag(tmp_path: Path, flags: dict, message: str) -> None:
    with pytest.raises(UsageError, match=None) as err:
        _opts(tmp_path, **flags)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_an_experiment_that_cannot_compile_is_refused_before_the_queue(tmp_path: Path) -> None:
    exp = tmp_path / "broken.py"
    exp.write_text("def main(:\n    pass\n")
    with pytest.raises(UsageError, match=r"broken.py: line 1: .* after the queue wait"):
        resolve_options(parse_spec(SPEC), str(exp), user="u", workdir=str(REPO))


class FakeSite:
    """sbatch refuses (as an enforcing site does) or nodes are smaller than asked."""

    def __init__(
        self, stderr: str = "", capacity: tuple[int, int, int] | None = (8, 64000, 4), slurm: str = "slurm 24.11.5"
    ) -> None:
        self.stderr, self.capacity, self.sbatched, self.slurm = stderr, capacity, 0, slurm

    def version(self) -> SlurmVersion:
        return SlurmVersion.parse(self.slurm)

    def partition_nodes(self, partition: str | None) -> tuple[str, int]:
        return (partition or "gpu", 8)

    def partition_capacity(self, partition: str | None) -> tuple[int, int, int] | None:
        return self.capacity

    def partition_time_limit(self, partition: str | None) -> str | None:
        return "2-00:00:00"

    def qos_limits(self, qos: str) -> QosLimits | None:
        # as sacctmgr -P prints MaxWall, MaxTRES, MaxTRESPerNode of a QOS
        return (
            QosLimits(qos, "00:10:00", parse_tres("node=1,mem=64G"), parse_tres("gres/gpu=2")) if qos == "q" else None
        )

    def sbatch(self, script: str, hold: bool = False) -> int:
        self.sbatched += 1
        raise SlurmCommandError(["sbatch", script], 1, "", self.stderr)


def test_sbatch_refusing_is_its_reason_on_one_line_and_leaves_nothing(tmp_path: Path) -> None:
    spec = parse_spec({**SPEC, "fileroot": str(tmp_path / "root")})
    site = FakeSite("sbatch: error: Batch job submission failed: Invalid qos specification\n")
    with pytest.raises(UsageError) as err:
        submit(spec, _opts(tmp_path, qos="nope"), site)  # type: ignore[arg-type]
    assert str(err.value) == "sbatch refused the job: Batch job submission failed: Invalid qos specification; " \
                             "nothing was submitted"  # fmt: skip
    assert err.value.exit_code == 2 and site.sbatched == 1
    assert not [p for p in (tmp_path / "root").rglob("*") if p.is_file()]  # no job dir that looks like a job
    down = FakeSite("sbatch: error: Batch job submission failed: Unable to contact slurm controller (connect failure)")
    with pytest.raises(SlurmCommandError):  # not the user's mistake: exit 1, SLURM's own words
        submit(spec, _opts(tmp_path), down)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        ({"cpus_per_node": 16}, "--cpus-per-node 16: partition gpu's largest node has 8 CPUs"),
        ({"gpus_per_node": 8}, "--gpus-per-node 8: partition gpu's largest node has 4 GPUs"),
        ({"mem": "128G"}, "--mem 128G: partition gpu's largest node has 64000 MB"),
        (
            {"mem_per_cpu": "9G", "cpus_per_node": 8},
            "--mem-per-cpu 9G: 8 CPU.s. per node need 73728 MB, partition gpu's largest node has 64000 MB; "
            "ask for at most 8000M per CPU",
        ),
        ({"time": "3-00:00:00"}, "--time 3-00:00:00: partition gpu allows at most 2-00:00:00"),
        # sbatch reads a time of zero as no limit: over any MaxTime (it would pend for ever)
        ({"time": "0"}, "--time 0 .no limit.: partition gpu allows at most 2-00:00:00"),
        ({"time": "UNLIMITED", "partition": "gpu"}, "--time UNLIMITED .no limit.: partition gpu allows at most"),
        # on the fileroot's filesystem: the nodes see it as the login node does
        ({"python": "{root}/venv/bin/python3"}, 'python {root}/venv/bin/python3 .the spec.s "python".: no such file'),
        ({"workdir": "{root}/work"}, "--workdir {root}/work: no such directory"),
        ({"qos": "q", "time": "20"}, "--time 20: QOS q allows at most 00:10:00 per job .MaxWall."),
        ({"qos": "q", "nodes": 2}, "--nodes: the job needs 2 node in all, QOS q allows at most 1 per job"),
        ({"qos": "q", "gpus_per_node": 3}, "--gpus-per-node 3: QOS q allows at most 2 gres/gpu per node"),
    ],
)
def test_what_the_site_or_the_nodes_would_refuse_is_refused_here(tmp_path: Path, flags: dict, message: str) -> None:
    site = FakeSite()
    flags = {k: v.replace("{root}", str(tmp_path)) if isinstance(v, str) else v for k, v in flags.items()}
    spec = parse_spec({**SPEC, "fileroot": str(tmp_path), "node_local_dir": "/local"})  # tmp_path is in /tmp
    with pytest.raises(UsageError, match=message.replace("{root}", str(tmp_path))) as err:
        submit(spec, _opts(tmp_path, **flags), site)  # type: ignore[arg-type]
    assert site.sbatched == 0 and "\n" not in str(err.value)
    assert not list(tmp_path.glob("u/*/*"))  # no job dir


def test_a_path_on_a_nodes_own_disk_is_left_to_the_node(tmp_path: Path) -> None:
    """The node-local dir differs per node: a python there may exist on the nodes (a setup line
    made it), so it is not refused here (the node names it, see the node script)."""
    spec = parse_spec({**SPEC, "fileroot": str(tmp_path), "node_local_dir": "/scratch-local"})
    from slurm_rl.login.submission.preflight import check_node_paths

    check_node_paths(plan_job(spec, _opts(tmp_path, python="/scratch-local/venv/bin/python")))  # no error


def test_cleanup_outside_the_allocation_carries_account_qos_reservation(tmp_path: Path) -> None:
    paths = JobPaths(tmp_path / "7")
    paths.job_dir.mkdir()
    opts = _opts(tmp_path, qos="high", reservation="r1")
    JobManifest(**opts.model_dump(), slurm_rl_version="0", cluster_name="site").write(paths.manifest)
    assert site_flags(paths) == ["--account=proj", "--qos=high", "--reservation=r1"]


@pytest.mark.parametrize(
    ("flags", "lines"),
    [
        ({"gpus_per_node": 4}, ["#SBATCH --gpus-per-node=4"]),
        ({"gpus_per_node": 4, "gpu_type": "h100"}, ["#SBATCH --gpus-per-node=h100:4"]),
        ({"gpus_per_node": 4, "gpu_request": "gres"}, ["#SBATCH --gres=gpu:4"]),
        (
            {"gpus_per_node": 2, "gpu_request": "gres", "gpu_type": "a100", "gres": "nvme:1"},
            ["#SBATCH --gres=nvme:1,gpu:a100:2"],
        ),
    ],
)
def test_gpus_are_asked_for_as_the_site_wants(tmp_path: Path, flags: dict, lines: list[str]) -> None:
    """--gpus-per-node by default; --gres=gpu[:TYPE]:N where the spec says gpu_request "gres"."""
    script = render_sbatch(plan_job(parse_spec(SPEC), _opts(tmp_path, **flags)))
    sbatch = [line for line in script.splitlines() if "--gpus" in line or "--gres" in line]
    assert sbatch == lines
