"""A job's progress (issue 58, part 2): metrics steps and heartbeats from the driver, the driver's
own output (not what Ray forwards from workers) from node 0's watch of its log; `status` and
`list` show the newest and its age."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

import slurm_rl
from slurm_rl.core import progress
from slurm_rl.job.progress_watch import OutputWatch


def test_heartbeat_and_metrics_steps_are_progress(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("SLURM_RL_JOB_DIR", raising=False)
    slurm_rl.heartbeat()  # outside a job: nothing, no error
    assert progress.last(tmp_path) is None
    monkeypatch.setenv("SLURM_RL_JOB_DIR", str(tmp_path))
    slurm_rl.heartbeat("loading shards")
    assert progress.last(tmp_path).what == "heartbeat: loading shards"
    slurm_rl.MetricsLog(tmp_path, tensorboard=False, wandb=False).log(step=12, reward=0.5)
    seen = progress.last(tmp_path)
    assert seen.what == "step 12" and seen.age() < 5


@pytest.mark.parametrize(
    "line, own",
    [
        ("step 3: loss 0.2", True),
        ("(GenerationWorker pid=4242, ip=10.77.0.12) sampled 32", False),
        ("(pid=77) warming up", False),
        ("\x1b[36m(Worker pid=9, ip=10.77.0.11)\x1b[0m hi", False),
        ("(raylet, ip=10.77.0.12) A worker died", False),
        ("(autoscaler +3s) Tip: use ray status", False),
        ("slurm-rl: WARNING: OOM kill on node2: ...", False),
        ("(1, 2) is a tuple the driver printed", True),
        ("   ", False),
    ],
)
def test_own_output_is_the_drivers_not_rays_forwarded_lines(line: str, own: bool) -> None:
    assert progress.own_output([line]) is own


def test_the_watch_counts_only_new_own_lines(tmp_path: Path) -> None:
    log = tmp_path / "driver.log"
    log.write_text("an earlier attempt's output\n")
    watch = OutputWatch(log, tmp_path)
    watch.poll()
    assert progress.last(tmp_path) is None  # what was there before this attempt is not progress
    with open(log, "a") as f:
        f.write("(Worker pid=5, ip=10.77.0.12) busy\n")
    watch._next = 0.0
    watch.poll()
    assert progress.last(tmp_path) is None  # a worker's line
    time.sleep(0.3)
    watch._next = 0.0
    watch.poll()  # nothing new: the next line comes after this read
    read_at = time.time()
    with open(log, "a") as f:
        f.write("step 1 done\n")
    watch._next = 0.0
    watch.poll()
    seen = progress.last(tmp_path)
    assert seen is not None and seen.what == "driver output"
    assert read_at - 0.2 <= seen.t <= read_at + 0.001  # noted at the read before it (ms), not at the first


def test_the_newest_source_wins(tmp_path: Path) -> None:
    now = time.time()
    progress.record(tmp_path, "driver", "step 7", t=now - 60)
    progress.record(tmp_path, "output", "driver output", t=now - 5)
    assert progress.last(tmp_path).what == "driver output"
    progress.record(tmp_path, "driver", "step 8", t=now)
    assert progress.last(tmp_path).what == "step 8"


def test_fast_steps_are_noted_once_a_second_and_the_last_one_is_never_lost(tmp_path: Path, monkeypatch) -> None:
    from slurm_rl.driver import heartbeat as driver_progress

    monkeypatch.setitem(driver_progress._steps, "written", 0.0)
    log = slurm_rl.MetricsLog(tmp_path, tensorboard=False, wandb=False)
    log.log(step=1, loss=1.0)
    assert progress.last(tmp_path).what == "step 1"  # the first: at once
    before_last = time.time()
    for step in range(2, 50):  # faster than one a second: not a file write each
        log.log(step=step, loss=1.0)
    assert progress.last(tmp_path).what == "step 1"
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and progress.last(tmp_path).what != "step 49":
        time.sleep(0.05)
    noted = progress.last(tmp_path)
    assert noted.what == "step 49" and before_last <= noted.t <= time.time() - 0.5  # with its own time
