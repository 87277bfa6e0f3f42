"""The batch script's finalize: plain shell (a container site's bare node may have no python),
run here with bash against a real job dir and a recording `scontrol` on PATH."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
from importlib import resources
from pathlib import Path

import pytest

from slurm_rl.core.events import append_event, read_events
from slurm_rl.core.exits import read_exit, record_exit
from slurm_rl.core.paths import JobPaths
from slurm_rl.login.submission.render import _env, finalize_files, retry_context

pytestmark = pytest.mark.unit


# `srun` on "node N": records its flags, then runs its command here as that node's task
FAKE_SRUN = """#!/bin/bash
node=
while [ "$1" != bash ]; do
  case $1 in --nodelist=*) node=${1#--nodelist=};; esac
  printf '%s ' "$1" >>"$0.calls"; shift
done
echo >>"$0.calls"
SLURMD_NODENAME=$node exec "$@"
"""


def finalize(
    tmp_path: Path,
    srun_rc: int,
    requeue: int = 0,
    attempt: int = 0,
    run_dir: Path | None = None,
    job_id: str = "42",
    nodes: str = "",
    dir_name: str = "job",
    retry_on: str | None = None,
    exclude: str | None = None,
    preflight_exclude: bool = False,
) -> tuple[int, list[str]]:
    """Run finalize; ``run_dir``: as a job of a chain sharing it; ``nodes``: the job's (a,b,c).
    Returns (exit, scontrol and scancel calls); srun's are in bin/srun.calls."""
    script = (
        _env()
        .get_template("finalize.sh.j2")
        .render(
            files=finalize_files(),
            requeue=requeue,
            requested_limit=20,
            chain=run_dir is not None,
            node_temp=shlex.quote(str(tmp_path / f"srl-{job_id}")),
            runtime_leftovers="''",
            **retry_context(retry_on, exclude),
            preflight_exclude=preflight_exclude,
        )
    )
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    log = tmp_path / "scontrol.calls"
    fakes = {
        "scontrol": f'[ "$1 $2" != "show hostnames" ] || {{ echo "$3" | tr , "\\n"; exit; }}\n'
        f'echo "scontrol $*" >>{log}',
        "scancel": f'echo "scancel $*" >>{log}',
    }
    for command, body in fakes.items():
        fake = bin_dir / command
        fake.write_text(f"#!/bin/sh\n{body}\n")
        fake.chmod(0o755)
    (bin_dir / "srun").write_text(FAKE_SRUN)
    (bin_dir / "srun").chmod(0o755)
    env = {
        **os.environ,
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "SLURM_RL_JOB_DIR": str(tmp_path / dir_name),  # named by the job's id, as on the cluster
        "SLURM_JOB_ID": job_id,
        "SLURM_JOB_NODELIST": nodes,
        "SLURM_RESTART_COUNT": str(attempt),
        "SLURM_RL_RUN_DIR": str(run_dir or ""),
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


def test_a_step_srun_could_not_start_on_a_node_names_that_node(tmp_path: Path) -> None:
    """Seen in the soak: SLURM gave the job node3 as its slurmd was killed; srun's launch failed
    there and it killed the tasks on node1 and node2, whose bootstraps then never reported."""
    paths = JobPaths(tmp_path / "job")
    paths.logs.mkdir(parents=True)
    paths.batch_log.write_text(
        "srun: error: Task launch for StepId=47973543.0 failed on node node3: Communication connection failure\n"
        "srun: error: Application launch failed: Communication connection failure\n"
        "srun: error: node1: task 0: Killed\n"
    )
    rc, _ = finalize(tmp_path, srun_rc=233)
    code, reason = read_exit(paths)
    assert (rc, code) == (233, 233)
    assert reason.startswith("the job step could not start on node3 (srun: Communication connection failure)"), reason


def test_the_nodes_srun_killed_are_cleaned_from_the_batch_script(tmp_path: Path) -> None:
    """Seen in the soak (seed 41): when srun could not start the step on node3 it SIGKILLed the
    tasks on node1 and node2, so their bootstraps never cleaned up and the job's temp dir stayed
    there. The batch script runs the job's cleanup on each node that did not report its own
    (node2 did), never on the node that is gone."""
    job_id = f"77{os.getpid()}"  # what marks this test's "job processes" on this machine
    paths = JobPaths(tmp_path / job_id)
    paths.logs.mkdir(parents=True)
    paths.cleanup_script.write_text((resources.files("slurm_rl.job") / "cleanup_node.sh").read_text())
    paths.batch_log.write_text(
        f"srun: error: Task launch for StepId={job_id}.0 failed on node node3: Communication connection failure\n"
    )
    append_event(paths.events, "node_cleaned", node="node2", attempt=0, killed=0)
    append_event(paths.events, "node_cleaned", node="node1", attempt=1, killed=0)  # another attempt's
    temp = tmp_path / f"srl-{job_id}"
    (temp / "session").mkdir(parents=True)
    left = subprocess.Popen(["sleep", "60"], env={**os.environ, "SLURM_RL_JOB_ID": job_id})
    # another node's srun from this batch host: it carries the cleanup's arguments, the temp dir too
    launcher = subprocess.Popen(["bash", "-c", "sleep 60; :", "slurm-rl-cleanup", job_id, "2", str(temp)])
    try:
        rc, _ = finalize(tmp_path, srun_rc=233, job_id=job_id, nodes="node1,node2,node3", dir_name=job_id)
        assert left.wait(timeout=10) == -signal.SIGTERM
        assert launcher.poll() is None
    finally:
        left.kill()
        launcher.kill()
        launcher.wait()
    assert rc == 233 and read_exit(paths)[1].startswith("the job step could not start on node3")
    assert not temp.exists()
    assert [c.split() for c in (tmp_path / "bin" / "srun.calls").read_text().splitlines()] == [
        ["--overlap", "--nodelist=node1", "--nodes=1", "--ntasks=1", "--kill-on-bad-exit=0", "--quiet"]
    ]
    event = next(e for e in read_events(paths.events) if e["event"] == "step_cleanup")
    assert event["skipped"] == "node3"
    assert [(r["node"], r["temp_dir_removed"], [k["pid"] for k in r["killed"]]) for r in event["reports"]] == [
        ("node1", True, [left.pid])
    ]


def test_a_failed_attempt_is_requeued_while_attempts_are_left(tmp_path: Path) -> None:
    paths = JobPaths(tmp_path / "job")
    record_exit(paths, 1, 'worker died: "node2" \\ lost')
    rc, calls = finalize(tmp_path, srun_rc=1, requeue=2, attempt=1)
    assert rc == 1 and calls == ["scontrol requeue 42"]
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
    assert rc == 75 and calls == ["scontrol update JobId=42 Requeue=1", "scontrol requeue 42"]
    assert read_events(paths.events)[-1]["requested"] is True


def chain_of_three(tmp_path: Path) -> Path:
    run_dir = tmp_path / "job"  # the chain's first job's dir is its run dir
    JobPaths(run_dir).job_dir.mkdir(parents=True, exist_ok=True)
    JobPaths(run_dir).chain_jobs.write_text("42\n43\n44\n")
    return run_dir


def test_a_chain_ends_when_its_run_finished_and_cancels_the_rest(tmp_path: Path) -> None:
    run_dir = chain_of_three(tmp_path)
    paths = JobPaths(run_dir)
    record_exit(paths, 0, "driver exited 0")
    assert finalize(tmp_path, srun_rc=0, run_dir=run_dir) == (0, ["scancel 43 44"])
    assert paths.chain_finished.read_text().strip() == "42"
    end = [e for e in read_events(paths.events) if e["event"] == "chain_end"]
    assert end and end[0]["cancelled"] == "43 44" and "finished" in end[0]["why"]


def test_a_requeue_asked_in_a_chain_is_the_next_jobs_to_do(tmp_path: Path) -> None:
    run_dir = chain_of_three(tmp_path)
    paths = JobPaths(run_dir)
    paths.requeue_request(0).parent.mkdir(parents=True, exist_ok=True)
    paths.requeue_request(0).write_text("warned\n")
    record_exit(paths, 75, "driver exited 75")
    assert finalize(tmp_path, srun_rc=75, run_dir=run_dir) == (75, [])  # no requeue, nothing cancelled
    assert [e["event"] for e in read_events(paths.events)][-2:] == ["chain_next", "job_end"]
    # the chain's last job has no next one: it requeues itself as a lone job would
    record_exit(paths, 75, "driver exited 75", keep_existing=False)
    rc, calls = finalize(tmp_path, srun_rc=75, run_dir=run_dir, job_id="44")
    assert rc == 75 and calls[-1] == "scontrol requeue 44"


def test_a_driver_that_fails_by_itself_ends_the_chain_a_lost_step_does_not(tmp_path: Path) -> None:
    run_dir = chain_of_three(tmp_path)
    paths = JobPaths(run_dir)
    paths.job_dir.mkdir(parents=True, exist_ok=True)
    assert finalize(tmp_path, srun_rc=137, run_dir=run_dir) == (137, [])  # the step died: the next job goes on
    record_exit(paths, 1, "driver exited 1", keep_existing=False)
    assert finalize(tmp_path, srun_rc=1, run_dir=run_dir) == (1, ["scancel 43 44"])
    assert not paths.chain_finished.exists()


def test_a_chain_job_that_starts_after_the_run_finished_ends_at_once(tmp_path: Path) -> None:
    run_dir = chain_of_three(tmp_path)
    job = JobPaths(tmp_path / "job44")
    job.job_dir.mkdir()
    script = (
        _env()
        .get_template("finalize.sh.j2")
        .render(
            files=finalize_files(),
            requeue=0,
            requested_limit=20,
            chain=True,
            node_temp="/tmp/x",
            runtime_leftovers="",
            **retry_context(None, None),
        )
    )
    env = {**os.environ, "SLURM_RL_JOB_DIR": str(job.job_dir), "SLURM_RL_RUN_DIR": str(run_dir), "SLURM_JOB_ID": "44"}
    call = f'{script}\nslurm_rl_chain_skip\necho "went on"'
    went_on = subprocess.run(["bash", "-c", call], env=env, capture_output=True, text=True, timeout=30)
    assert went_on.returncode == 0 and "went on" in went_on.stdout and read_exit(job) == (None, "")
    JobPaths(run_dir).chain_finished.write_text("43\n")
    skipped = subprocess.run(["bash", "-c", call], env=env, capture_output=True, text=True, timeout=30)
    assert skipped.returncode == 0 and "went on" not in skipped.stdout
    assert read_exit(job) == (0, "the chain's run already finished; nothing to do")
    [event] = read_events(job.events)
    assert event["event"] == "chain_skip" and event["finished_by"] == "43"
