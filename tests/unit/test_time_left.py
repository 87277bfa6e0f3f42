"""slurm_rl.time_left(): SLURM's end time as node 0 keeps it in the job dir, read by the driver
and by `status`; inf outside a job or without a limit."""

from __future__ import annotations

import math
import time
from datetime import datetime

from slurm_rl import time_left
from slurm_rl.core.end_time import parse_end_time, read_time_left, write_end_time
from slurm_rl.core.paths import JobPaths
from slurm_rl.job.end_time_watch import EndTimeWatch
from slurm_rl.login.reading.job_tables import human_seconds

LINE = "JobId=42 JobState=RUNNING TimeLimit=00:10:00 StartTime=2026-11-28T20:00:00 EndTime={end} Partition=lab"


def test_scontrols_end_time_is_read_as_local_time_or_inf() -> None:
    end = parse_end_time(LINE.format(end="2026-11-28T20:10:00"))
    assert end == datetime(2026, 11, 28, 20, 10).timestamp()
    assert parse_end_time(LINE.format(end="Unknown")) == math.inf
    assert parse_end_time(LINE.format(end="2026-11-28T20:10:00").replace("00:10:00", "UNLIMITED")) == math.inf


def test_the_driver_reads_what_node_0_wrote(tmp_path, monkeypatch) -> None:
    paths = JobPaths(tmp_path)
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    assert time_left() == math.inf  # outside a SLURM job
    monkeypatch.setenv("SLURM_JOB_ID", "42")
    monkeypatch.setenv("SLURM_RL_JOB_DIR", str(tmp_path))
    assert time_left() == math.inf  # node 0 has not asked SLURM yet
    write_end_time(paths.end_time, time.time() + 600, time.time())
    assert 595 <= time_left() <= 600
    write_end_time(paths.end_time, time.time() - 5, time.time())
    assert time_left() == 0.0  # never negative
    write_end_time(paths.end_time, math.inf, time.time())
    assert time_left() == math.inf and read_time_left(paths.end_time) == math.inf


def test_node_0_asks_slurm_once_per_refresh(tmp_path, monkeypatch) -> None:
    calls = []

    class Done:
        returncode, stdout, stderr = 0, LINE.format(end="2026-11-28T20:10:00"), ""

    monkeypatch.setattr("subprocess.run", lambda argv, **kw: calls.append(argv) or Done())
    watch = EndTimeWatch("42", JobPaths(tmp_path), refresh_s=3600)
    for _ in range(5):
        watch.poll()
    assert calls == [["scontrol", "show", "job", "-o", "42"]]
    assert read_time_left(JobPaths(tmp_path).end_time, now=datetime(2026, 11, 28, 20, 0).timestamp()) == 600


def test_time_left_reads_as_people_say_it() -> None:
    assert [human_seconds(s) for s in (42, 60, 75, 3600, 7300)] == ["42 s", "1 min", "1 min 15 s", "1 h", "2 h 1 min"]
