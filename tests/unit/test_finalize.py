"""The batch script's finalize: plain shell (a container site's bare node may have no python),
run here with bash against a real job dir and a recording `scontrol` on PATH."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest

from slurm_rl.core.events import read_events
from slurm_rl.core.exits import read_exit, record_exit
from slurm_rl.core.paths import JobPaths
from slurm_rl.login.render import _env, finalize_files

pytestmark = pytest.mark.unit


def finalize(tmp_path: Path, srun_rc: int, requeue: int = 0, attempt: int = 0) -> tuple[int, list[str]]:
    script = _env().get_template("finalize.sh.j2").render(files=finalize_files(), requeue=requeue, requested_limit=20)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    log = tmp_path / "scontrol.calls"
    fake = bin_dir / "scontrol"
    fake.write_text(f'#!/bin/sh\necho "$*" >>{log}\n')
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    env = {
        **os.environ,
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "SLURM_RL_JOB_DIR": str(tmp_path / "job"),
        "SLURM_JOB_ID": "42",
        "SLURM_RESTART_COUNT": str(attempt),
    }
    res = subprocess.run(["bash", "-c", f'{script}\nslurm_rl_finalize "$1"', "-", str(srun_rc)], env=env, timeout=30)
    calls = log.read_text().splitlines() if log.exists() else []
    return res.returncode, calls


def test_the_drivers_exit_code_wins_over_sruns(tmp_path: Path) -> None:
    paths = JobPaths(tmp_path / "job")
    record_exit(paths, 3, 'driver raised ValueError("bad \\ "quoted"\tinput")\nsecond line')
    rc, calls = finalize(tmp_path, srun_rc=1, requeue=0)
    assert (rc, calls) == (3, [])
    end = read_events(paths.events)[-1]
    assert end["event"] == "job_end" and end["exit_code"] == 3 and end["attempt"] == 0


def test_a_step_that_died_before_the_driver_finished_records_sruns_code(tmp_path: Path) -> None:
    paths = JobPaths(tmp_path / "job")
    paths.job_dir.mkdir(parents=True)
    rc, _ = finalize(tmp_path, srun_rc=137)
    assert rc == 137
    code, reason = read_exit(paths)
    assert code == 137 and "before the driver finished" in reason and str(paths.batch_log) in reason


def test_a_failed_attempt_is_requeued_while_attempts_are_left(tmp_path: Path) -> None:
    paths = JobPaths(tmp_path / "job")
    record_exit(paths, 1, 'worker died: "node2" \\ lost')
    rc, calls = finalize(tmp_path, srun_rc=1, requeue=2, attempt=1)
    assert rc == 1 and calls == ["requeue 42"]
    event = read_events(paths.events)[-1]  # valid JSON with the reason's quotes and backslash
    assert event["event"] == "requeue" and event["reason"] == 'worker died: "node2" \\ lost'
    assert read_exit(paths) == (None, "")  # the next attempt starts with no exit
    record_exit(paths, 1, "again")
    assert finalize(tmp_path, srun_rc=1, requeue=2, attempt=2)[0] == 1
    assert read_events(paths.events)[-1]["event"] == "job_end"


def test_a_requested_requeue_works_even_without_requeue(tmp_path: Path) -> None:
    paths = JobPaths(tmp_path / "job")
    record_exit(paths, 75, "driver exited 75")
    assert finalize(tmp_path, srun_rc=75) == (75, [])  # exit 75 alone is not a request
    paths.requeue_request(0).parent.mkdir(parents=True, exist_ok=True)
    paths.requeue_request(0).write_text("warned\n")
    record_exit(paths, 75, "driver exited 75", keep_existing=False)
    rc, calls = finalize(tmp_path, srun_rc=75)
    assert rc == 75 and calls == ["update JobId=42 Requeue=1", "requeue 42"]
    assert read_events(paths.events)[-1]["requested"] is True
