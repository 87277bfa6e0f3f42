"""What RL teams run every day, on the lab: a sweep (one job array, each task its own Ray
cluster) with its summary and plot, slurm_rl.map_array, and a run chained over two jobs."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from slurm_rl.core.events import read_events
from tests.conftest import REPO, run_cli
from tests.lab.helpers import EXPERIMENTS, SPEC, assert_no_leftovers, in_queue, wait_for

pytestmark = [pytest.mark.lab, pytest.mark.lab_shared, pytest.mark.timeout(300)]


def overlap(intervals: list[tuple[float, float]]) -> int:
    """The most intervals open at one moment."""
    marks = sorted([(a, 1) for a, _ in intervals] + [(b, -1) for _, b in intervals])
    most = now = 0
    for _, step in marks:
        now += step
        most = max(most, now)
    return most


# the checkout is root's: a lab user snapshots it as git's own refusal says (safe.directory), here
# for this command alone (git reads GIT_CONFIG_* as command-line configuration)
TRUST_THE_CHECKOUT = {"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "safe.directory", "GIT_CONFIG_VALUE_0": str(REPO)}


# not in the smoke set: a sweep's array tasks and their states are, on every SLURM, in
# test_job_states_lab's wait race; throttling, the summary and the plot do not change with SLURM
def test_a_four_point_sweep_two_at_a_time_with_summary_and_plot(lab: list[str]) -> None:
    res = run_cli(
        "sweep",
        SPEC,
        str(EXPERIMENTS / "sweep_point.py"),
        *("--nodes", "1", "--cpus-per-node", "1", "--max-concurrent", "2", "--snapshot", "--wait", "--json"),
        *("--", "--lr", "0.1,0.3", "--seed", "0,1", "--fail-at", "0.3:1"),
        timeout=240,
        env=TRUST_THE_CHECKOUT,
    )
    assert res.returncode == 1, (res.stdout, res.stderr)  # one task failed: the sweep did
    data = json.loads(res.stdout.splitlines()[-1])
    array_id, tasks = data["array_id"], data["tasks"]
    assert [t["job_id"] for t in tasks] == [f"{array_id}_{i}" for i in range(4)]
    assert [(t["state"], t["exit_code"]) for t in tasks] == [("COMPLETED", 0)] * 3 + [("FAILED", 3)]
    dirs = [Path(t["job_dir"]) for t in tasks]
    # each task its own job: job dir, token, Ray cluster (its driver saw its own point)
    assert len({(d / "ray_auth_token").read_text() for d in dirs}) == 4
    points = [(lr, seed) for lr in ("0.1", "0.3") for seed in ("0", "1")]
    sweep_dir = dirs[0].parent / f"sweep-{array_id}"
    for d, (lr, seed) in zip(dirs, points):
        log = (d / "logs" / "driver.log").read_text()
        assert f"point lr={lr} seed={seed} " in log, log
        # one snapshot for the whole sweep, run by every task
        assert f"file={sweep_dir / 'code' / 'tests' / 'lab' / 'experiments' / 'sweep_point.py'}" in log, log
        manifest = json.loads((d / "manifest.json").read_text())
        assert manifest["sweep_point"] == {"lr": lr, "seed": seed}
        assert manifest["experiment_args"] == ["--lr", lr, "--seed", seed, "--fail-at", "0.3:1"]
    assert (sweep_dir / "code").is_dir() and all((d / "code").is_symlink() for d in dirs)
    runs = []
    for d in dirs:
        ev = read_events(d / "events.jsonl")
        runs.append(
            (min(e["t"] for e in ev if e["event"] == "node_start"), max(e["t"] for e in ev if e["event"] == "job_end"))
        )
    assert overlap(runs) <= 2, runs  # --max-concurrent 2

    status = run_cli("status", str(array_id), "--json", timeout=60)
    assert [json.loads(line)["job_id"] for line in status.stdout.splitlines()] == [t["job_id"] for t in tasks]
    causes = {str(row["job_id"]): row["cause"]["kind"] for row in map(json.loads, status.stdout.splitlines())}
    assert causes.pop(f"{array_id}_3") == "driver_error" and set(causes.values()) == {"completed"}, causes
    summary = run_cli("sweep-summary", str(array_id), timeout=60)
    assert summary.returncode == 0, summary.stderr
    assert f"task 3 ({array_id}_3) failed (the driver failed): driver exited 3" in summary.stdout, summary.stdout
    rows = [
        json.loads(line) for line in run_cli("sweep-summary", str(array_id), "--json", timeout=60).stdout.splitlines()
    ]
    assert [r["point"] for r in rows] == [{"lr": lr, "seed": seed} for lr, seed in points]
    assert [round(r["metrics"]["loss"], 4) for r in rows] == [round(int(s) + float(lr) / 3, 4) for lr, s in points]
    plot = Path(rows[0]["plot"])
    assert plot == sweep_dir / "comparison.png" and plot.stat().st_size > 5000
    for t in tasks:
        assert_no_leftovers(lab, t["job_id"])


def _product(x: int, y: int) -> tuple[int, int, str]:
    import os

    import ray

    from slurm_rl.distributed import init_ray

    init_ray()
    return x * y, len([n for n in ray.nodes() if n["Alive"]]), os.environ["SLURM_RL_JOB_DIR"].rsplit("/", 1)[1]


def test_map_array_runs_each_call_as_a_task_with_its_own_cluster(lab: list[str]) -> None:
    import slurm_rl

    jobs = slurm_rl.map_array(SPEC, _product, [2, 3], [10, 100], nodes=2, job_options={"cpus_per_node": 1})
    array_id = str(jobs[0].job_id).split("_")[0]
    assert [str(j.job_id) for j in jobs] == [f"{array_id}_0", f"{array_id}_1"]
    assert [j.result() for j in jobs] == [(20, 2, f"{array_id}_0"), (300, 2, f"{array_id}_1")]


@pytest.mark.lab_waits  # SLURM's clocks: first in the lab stream (tests/conftest.py)
def test_a_chained_run_spans_two_jobs_and_matches_an_uninterrupted_one(lab: list[str]) -> None:
    res = run_cli(
        "submit",
        SPEC,
        str(EXPERIMENTS / "chain_counter.py"),
        *("--nodes", "1", "--time", "5", "--chain", "3", "--json", "--", "--steps", "40"),
        timeout=60,
    )
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout.splitlines()[-1])
    first, second, third = data["chain"]
    run_dir = Path(data["run_dir"])
    assert wait_for((run_dir / "metrics.jsonl").exists, 90)
    # what SLURM does before the time limit (--signal B:USR2@...): USR2 to the batch shell
    subprocess.run(["scancel", "--signal=USR2", "--batch", str(first)], check=True, timeout=30)
    assert wait_for((run_dir / "result.json").exists, 150), read_events(run_dir / "events.jsonl")
    assert wait_for(lambda: not any(in_queue(j) for j in (first, second, third)), 60)
    result = json.loads((run_dir / "result.json").read_text())
    x = 1
    for step in range(40):  # the same recurrence, uninterrupted
        x = (x * 31 + step) % 1_000_003
    assert (result["step"], result["x"]) == (40, x)
    assert result["jobs"] == [str(first), str(second)]  # two jobs, the second resumed the first's checkpoint
    assert any(e["event"] == "chain_next" for e in read_events(run_dir / "events.jsonl"))
    [end] = [e for e in read_events(Path(data["job_dirs"][1]) / "events.jsonl") if e["event"] == "chain_end"]
    assert end["cancelled"] == str(third)  # the finished run left nothing pending
    assert not (Path(data["job_dirs"][2]) / "logs" / "driver.log").exists()
    second_log = (Path(data["job_dirs"][1]) / "logs" / "driver.log").read_text()
    assert f"run dir {run_dir}, starting at step" in second_log and "starting at step 0" not in second_log
    for job in (first, second):
        assert_no_leftovers(lab, job)
