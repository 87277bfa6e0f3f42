"""Process discovery: only positively marked processes of the job are stopped."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from slurm_rl.core.procs import MARKER_ENV, job_processes, stop_job_processes


def _spawn(env_marker: str | None, code: str = "import time; time.sleep(60)") -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if k != MARKER_ENV}
    if env_marker is not None:
        env[MARKER_ENV] = env_marker
    return subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE)


def test_stops_marked_processes_and_nothing_else() -> None:
    mine = _spawn("unit-job-1")
    other_job = _spawn("unit-job-2")
    unmarked = _spawn(None)
    try:
        found = {p.pid for p in job_processes("unit-job-1")}
        assert mine.pid in found and other_job.pid not in found and unmarked.pid not in found
        killed = stop_job_processes("unit-job-1", None, grace_s=0.5)
        assert [k.pid for k in killed] == [mine.pid]
        assert mine.wait(timeout=5) is not None
        assert other_job.poll() is None and unmarked.poll() is None
    finally:
        for p in (mine, other_job, unmarked):
            p.kill()
            p.wait()


def test_finds_processes_by_open_file_in_temp_dir(tmp_path: Path) -> None:
    temp_dir = str(tmp_path / "srl-77")
    os.makedirs(temp_dir)
    holder = _spawn(
        None, f"import time; f = open({temp_dir + '/log.txt'!r}, 'w'); print('ok', flush=True); time.sleep(60)"
    )
    bystander = _spawn(None)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == b"ok\n"  # the file is open
        found = {p.pid for p in job_processes("no-such-job", temp_dir)}
        assert holder.pid in found and bystander.pid not in found
    finally:
        holder.kill()
        bystander.kill()
        holder.wait()
        bystander.wait()


def test_a_cleanups_launcher_on_the_node_is_never_the_jobs(tmp_path: Path) -> None:
    """The batch script's srun of the job's cleanup (templates/finalize.sh.j2) runs on node 0 and
    carries the job's temp dir in its arguments: the cleanup there killed it, and the reports of
    every node with it. A cleanup's command line is marked; a job process naming the dir is not."""
    temp_dir = str(tmp_path / "srl-78")
    for word in ("slurm-rl-cleanup", "slurm_rl.job.cleanup"):
        launcher = subprocess.Popen(["bash", "-c", "sleep 60; :", word, "78", "2", temp_dir])
        daemon = subprocess.Popen(["bash", "-c", "sleep 60; :", "raylet", f"--session-dir={temp_dir}/session"])
        try:
            found = {p.pid for p in job_processes("78", temp_dir)}
            assert daemon.pid in found and launcher.pid not in found, word
        finally:
            for p in (launcher, daemon):
                p.kill()
                p.wait()


def test_sigkill_after_grace_for_processes_ignoring_sigterm() -> None:
    stubborn = _spawn(
        "unit-job-3",
        "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        "print('ready', flush=True); time.sleep(60)",
    )
    try:
        assert stubborn.stdout is not None and stubborn.stdout.readline() == b"ready\n"  # handler installed
        killed = stop_job_processes("unit-job-3", None, grace_s=0.3)
        assert [(k.pid, k.signal) for k in killed] == [(stubborn.pid, "KILL")]
    finally:
        stubborn.kill()
        stubborn.wait()
