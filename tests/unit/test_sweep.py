"""Sweeps and chains on the login side: the grid (comma lists, --grid files), what a sweep
refuses before anything is submitted, array task ids, and `sweep --dry-run`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from slurm_rl.core.errors import UsageError
from slurm_rl.core.job_ids import as_slurm_id, is_slurm_job_id, job_number
from slurm_rl.login.api import default_name
from slurm_rl.login.reading.lookup import parse_job_id
from slurm_rl.login.sweep import expand_args, read_grid, sweep_points
from slurm_rl.slurm import Completed, SlurmClient
from tests.conftest import REPO, run_cli

pytestmark = pytest.mark.unit
LAB = str(REPO / "cluster_specs" / "lab.json")
HELLO = str(REPO / "examples" / "hello.py")


def test_comma_lists_expand_to_their_product_last_fastest() -> None:
    points = expand_args(("--lr", "1e-4,3e-4", "--seed=0,1", "--steps", "5"))
    assert [p.args for p in points] == [
        ("--lr", "1e-4", "--seed=0", "--steps", "5"),
        ("--lr", "1e-4", "--seed=1", "--steps", "5"),
        ("--lr", "3e-4", "--seed=0", "--steps", "5"),
        ("--lr", "3e-4", "--seed=1", "--steps", "5"),
    ]
    assert points[1].values == {"lr": "1e-4", "seed": "1"}
    assert [p.values for p in expand_args(("a,b",))] == [{"arg0": "a"}, {"arg0": "b"}]
    assert [p.args for p in expand_args(("--steps", "5"))] == [("--steps", "5")]  # one task


def test_an_empty_value_in_a_list_is_refused() -> None:
    with pytest.raises(UsageError, match=r"'1e-4,': an empty value"):
        expand_args(("--lr", "1e-4,"))


def test_grid_file_lines_times_the_comma_lists(tmp_path: Path) -> None:
    grid = tmp_path / "grid.jsonl"
    grid.write_text('{"lr": 0.0001, "warmup": true}\n\n# a comment\n{"lr": 0.0003, "tag": "b c", "warmup": false}\n')
    points = sweep_points(("--seed", "0,1"), str(grid))
    assert [p.args for p in points] == [
        ("--seed", "0", "--lr", "0.0001", "--warmup"),
        ("--seed", "0", "--lr", "0.0003", "--tag", "b c"),
        ("--seed", "1", "--lr", "0.0001", "--warmup"),
        ("--seed", "1", "--lr", "0.0003", "--tag", "b c"),
    ]
    assert points[1].values == {"seed": "0", "lr": "0.0003", "tag": "b c", "warmup": "false"}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{bad\n", "line 1 is not JSON"),
        ('{"lr": 1}\n[1, 2]\n', "line 2 is not a JSON object"),
        ('{"lr": [1, 2]}\n', "'lr' is a list"),
        ("\n# nothing\n", "no points in it"),
    ],
)
def test_bad_grid_files_name_the_line(tmp_path: Path, text: str, message: str) -> None:
    grid = tmp_path / "grid.jsonl"
    grid.write_text(text)
    with pytest.raises(UsageError, match=message):
        read_grid(str(grid))


def test_sweep_dry_run_lists_the_tasks_and_the_array(tmp_path: Path) -> None:
    res = run_cli(
        "sweep", LAB, HELLO, "-N", "2", "--max-concurrent", "2", "--dry-run", "--", "--lr", "1,2", "--seed", "0,1,2"
    )
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines()[:2] == ["# task 0: --lr 1 --seed 0", "# task 1: --lr 1 --seed 1"]
    assert "#SBATCH --array=0-5%2" in res.stdout and '"${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID}"' in res.stdout
    data = json.loads(run_cli("sweep", LAB, HELLO, "--dry-run", "--json", "--", "--lr", "1,2").stdout)
    assert data == {
        "array": "0-1",
        "tasks": [{"args": ["--lr", "1"], "point": {"lr": "1"}}, {"args": ["--lr", "2"], "point": {"lr": "2"}}],
        "submitted": False,
    }


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--max-concurrent", "0"), "--max-concurrent 0: must be at least 1"),
        (("--head-partition", "lab"), "--head-partition 'lab': makes a heterogeneous job"),
        (("--chain", "2"), "--chain 2: does not combine with a sweep"),
        (("--grid", "/nonexistent/grid.jsonl"), "--grid /nonexistent/grid.jsonl: cannot read it"),
    ],
)
def test_a_sweep_refuses_in_one_line_and_submits_nothing(args: tuple[str, ...], message: str) -> None:
    res = run_cli("sweep", LAB, HELLO, *args, "--dry-run", "--", "--lr", "1,2")
    assert res.returncode == 2, (res.stdout, res.stderr)
    assert message in res.stderr and len(res.stderr.strip().splitlines()) == 1, res.stderr


def test_array_task_ids_are_job_ids() -> None:
    assert parse_job_id("4711_3") == "4711_3" and parse_job_id("4711") == 4711
    assert is_slurm_job_id("4711_3") and not is_slurm_job_id("local-1") and as_slurm_id("4711") == 4711
    assert len({job_number(f"4711_{i}") for i in range(8)}) == 8  # ports spread per task
    with pytest.raises(UsageError, match="a sweep task's"):
        parse_job_id("4711_")


def test_a_tasks_preferred_gcs_port_is_spread_by_its_own_slurm_id(monkeypatch: pytest.MonkeyPatch) -> None:
    """Task 1 of array 47854963 (own id 47854965) took the port of job 47854962, submitted just
    before it (7919 is -1 modulo the 220 preferred ports): the two heads started within a second
    on one node, both found 22200 free, and the second GCS could not bind it (seen on the lab).
    Jobs whose SLURM ids lie within 220 of each other never share a preferred port."""
    from slurm_rl.core.ports import preferred_gcs_port
    from slurm_rl.job.context import port_number

    monkeypatch.setenv("SLURM_JOB_ID", "47854965")
    assert port_number("47854963_1") == 47854965
    ports = {preferred_gcs_port(47854962)}
    for own, task in ((47854964, "47854963_0"), (47854965, "47854963_1"), (47854966, "47854963_2")):
        monkeypatch.setenv("SLURM_JOB_ID", str(own))
        ports.add(preferred_gcs_port(port_number(task)))
    assert len(ports) == 4
    monkeypatch.delenv("SLURM_JOB_ID")
    assert port_number("local-20261126-1-2") == job_number("local-20261126-1-2")  # no SLURM: the id's number


def test_srun_gets_an_array_tasks_own_numeric_id() -> None:
    calls: list[list[str]] = []

    def runner(argv: list[str], timeout: float) -> Completed:
        calls.append(argv)
        return Completed(0, "JobId=47750911 ArrayJobId=47750910 ArrayTaskId=0 JobState=RUNNING\n", "")

    client = SlurmClient(runner)
    assert client.numeric_job_id("47750910_0") == 47750911 and client.numeric_job_id(12) == 12
    assert calls == [["scontrol", "show", "job", "-o", "47750910_0"]]


def test_a_function_names_its_job_as_slurm_allows() -> None:
    def _helper() -> None: ...

    def train() -> None: ...

    assert default_name(_helper) == "helper" and default_name(lambda: 0) == "lambda"
    assert default_name(train) == "train"


@pytest.mark.parametrize("command", ["logs", "stacks", "fetch", "plot"])
def test_a_sweeps_array_id_where_one_job_is_wanted_names_its_tasks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: str
) -> None:
    """Found by the soak: `slurm-rl logs ARRAYID` said "no slurm-rl job dir found ... is it your
    job?" for the user's own sweep. A command that takes one job now names the sweep's tasks."""
    from slurm_rl.core.paths import JobPaths
    from slurm_rl.login.reading import index
    from slurm_rl.login.sweep import SWEEP_RECORD, sweep_dir_for

    monkeypatch.setenv(index.INDEX_ENV, str(tmp_path / "jobs.jsonl"))
    name_dir = tmp_path / "root" / "u" / "exp"
    tasks = [{"job_id": f"4242_{k}", "job_dir": str(name_dir / f"4242_{k}")} for k in range(2)]
    sweep_dir_for(name_dir, 4242).mkdir(parents=True)
    (sweep_dir_for(name_dir, 4242) / SWEEP_RECORD).write_text(json.dumps({"array_id": 4242, "tasks": tasks}))
    for t in tasks:
        paths = JobPaths(Path(str(t["job_dir"])))
        paths.job_dir.mkdir()
        paths.manifest.write_text("{}")  # the index lists jobs whose dir is there
        index.record(str(t["job_id"]), paths, "lab")
    res = run_cli(command, "4242", env={index.INDEX_ENV: str(tmp_path / "jobs.jsonl")})
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1, (res.stdout, res.stderr)
    assert "job 4242 is a sweep of 2 task(s)" in res.stderr and "give one (4242_0, 4242_1)" in res.stderr
    assert "slurm-rl status 4242" in res.stderr
