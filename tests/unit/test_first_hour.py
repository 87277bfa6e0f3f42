"""A new team's first hour: each mistake or failure explains itself where the user looks (the
text, the exit code), local runs are jobs like any other, and tables fit 80 columns."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from slurm_rl.core.events import append_event, read_events
from slurm_rl.core.exits import record_exit, with_oom_kills
from slurm_rl.core.manifest import JobManifest
from slurm_rl.core.paths import JobPaths
from slurm_rl.distributed._engine.launch import explain_cause
from slurm_rl.distributed._engine.reliability.tables import print_table
from slurm_rl.job.node import describe_error
from slurm_rl.login.reading.job_tables import print_table as print_jobs
from slurm_rl.login.reading.job_wait import wait_for_job
from slurm_rl.login.reading.summary import summarize
from slurm_rl.slurm import JobState
from tests.conftest import REPO, run_cli

LAB_SPEC = str(REPO / "cluster_specs" / "lab.json")
TRACEBACK = [
    "step 1",
    "Traceback (most recent call last):",
    '  File "/shared/exp.py", line 9, in <module>',
    "    train(lr=-1)",
    "ValueError: the learning rate is negative",
]


class FakeSlurm:
    """What SLURM says about one job, no SLURM needed."""

    def __init__(self, state: str) -> None:
        self.state = state

    def job_state(self, job_id: int) -> JobState:
        return JobState(job_id, self.state, "node[1-2]", 0, "")


def _job(tmp_path: Path, *, time: str | None = None, exit_code: int | None = None) -> JobPaths:
    paths = JobPaths(tmp_path / "alice" / "exp" / "4242")
    paths.logs.mkdir(parents=True)
    JobManifest(slurm_rl_version="0", cluster_name="lab", nodes=2, time=time).write(paths.manifest)
    paths.driver_log.write_text("\n".join(TRACEBACK) + "\n")
    append_event(paths.events, "submitted", job_id=4242)
    if exit_code is not None:
        record_exit(paths, exit_code, f"driver exited {exit_code}")
        append_event(paths.events, "job_end", exit_code=exit_code)
    return paths


def test_a_bare_submit_shows_usage() -> None:
    env = {k: v for k, v in os.environ.items() if k != "CLUSTER_SPEC_PATH"}
    res = run_cli("submit", env=env)
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1, res.stderr  # one line, as all
    assert "slurm-rl submit SPEC.json EXPERIMENT" in res.stderr and "see `slurm-rl submit --help`" in res.stderr


def test_a_spec_after_the_experiment_is_refused(tmp_path: Path) -> None:
    exp = tmp_path / "tiny.py"
    exp.write_text("print(1)\n")
    res = run_cli("submit", str(exp), LAB_SPEC, "--dry-run", cwd=REPO)
    assert res.returncode == 2 and res.stdout == ""
    assert f"put the spec first: slurm-rl submit {LAB_SPEC} {exp}" in res.stderr


def test_workdir_is_a_flag_and_resolved(tmp_path: Path) -> None:
    exp = tmp_path / "tiny.py"
    exp.write_text("print(1)\n")
    res = run_cli("submit", LAB_SPEC, str(exp), "--dry-run", "--json", "--workdir", str(REPO), cwd=tmp_path)
    assert res.returncode == 0 and json.loads(res.stdout)["manifest"]["workdir"] == str(REPO), res.stderr


def test_a_warning_signal_must_come_before_the_time_limit() -> None:
    res = run_cli("submit", LAB_SPEC, "--time", "1", "--signal", "B:USR2@120", "--dry-run", cwd=REPO)
    assert res.returncode == 2 and "--signal 'B:USR2@120': warns 120 s before a time limit of 1" in res.stderr
    short = run_cli("submit", LAB_SPEC, "--time", "1", "--dry-run", cwd=REPO)  # the default adapts
    assert short.returncode == 0 and "#SBATCH --signal=B:USR2@30" in short.stdout


def test_dry_run_json_is_json() -> None:
    res = run_cli("submit", LAB_SPEC, "examples/hello.py", "-N", "2", "--dry-run", "--json", cwd=REPO)
    data = json.loads(res.stdout)
    assert data["submitted"] is False and data["nodes"] == 2 and data["script"].startswith("#!")
    assert data["manifest"]["nodes"] == 2 and data["manifest"]["cluster_name"] == "slurmlab"


@pytest.mark.parametrize(
    ("time", "said"),
    [
        ("1", "1 min"),
        ("0:20", "1 min: SLURM rounds --time 0:20 up to whole minutes"),
        ("4:00:00", "4 h"),
        (None, "the partition's limit"),
    ],
)
def test_running_out_of_time_is_no_crash(tmp_path: Path, time: str | None, said: str) -> None:
    paths = _job(tmp_path, time=time)
    record_exit(paths, 139, "driver killed by signal SIGSEGV")  # what Ray's handlers make of SLURM's SIGTERM
    summary = summarize(paths, FakeSlurm("TIMEOUT").job_state(4242))
    assert summary.state == "TIMEOUT" and summary.exit_reason == f"hit the time limit ({said})"


def test_wait_shows_the_driver_output_and_ends_with_its_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    paths = _job(tmp_path, exit_code=1)
    summary = wait_for_job(paths, 4242, FakeSlurm("FAILED"), poll_s=0.01)  # type: ignore[arg-type]
    err = capsys.readouterr().err
    assert summary.exit_code == 1
    assert "step 1" in err  # the driver's own output, while following
    ending = err[err.index("job 4242: FAILED, exit code 1: driver exited 1") :]
    assert "the driver's error (last lines of its traceback)" in ending
    assert "ValueError: the learning rate is negative" in ending and f"driver log: {paths.driver_log}" in ending


class LaggingSlurm:
    """SLURM a step behind the job dir: RUNNING, then COMPLETING (the epilog), then FAILED."""

    def __init__(self, states: list[str]) -> None:
        self.states = states

    def job_state(self, job_id: int) -> JobState:
        state = self.states.pop(0) if len(self.states) > 1 else self.states[0]
        return JobState(job_id, state, "node[1-2]", None, "")


def test_wait_ends_on_slurms_final_state_not_on_the_exit_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The exit file and job_end are there while SLURM still says RUNNING, then COMPLETING: the
    wait goes on until FAILED, and never prints a state that disagrees with the exit code."""
    import slurm_rl.login.reading.job_wait as jobs

    monkeypatch.setattr(jobs, "ENDING_POLL_S", 0.01)
    paths = _job(tmp_path, exit_code=3)
    slurm = LaggingSlurm(["RUNNING", "RUNNING", "COMPLETING", "COMPLETING", "FAILED"])
    assert summarize(paths, slurm.job_state(4242)).state == "COMPLETING"  # status in the window
    summary = wait_for_job(paths, 4242, slurm, poll_s=0.01)  # type: ignore[arg-type]
    assert (summary.state, summary.exit_code) == ("FAILED", 3)
    assert slurm.states == ["FAILED"]  # it asked until the final state
    assert "RUNNING, exit code" not in capsys.readouterr().err


def test_a_bootstrap_error_names_the_missing_path() -> None:
    try:
        os.chdir("/nonexistent/workdir")
    except OSError as exc:
        said = describe_error(exc)
    assert "FileNotFoundError" in said and "'/nonexistent/workdir' does not exist" in said


def test_a_build_error_leads_with_its_cause_once() -> None:
    ray_text = (
        "The actor died because of an error raised in its creation task, \x1b[36mray::w-0-0:Bad.__init__()\x1b[39m\n"
        "           ^^^^^^^^^^^^^^^\n"
        '  File "/shared/bad.py", line 3, in __init__\n'
        "    import torchh\n"
        "ModuleNotFoundError: No module named 'torchh'\n"
    )
    detail, root = explain_cause(RuntimeError(ray_text))
    assert root == "ModuleNotFoundError: No module named 'torchh'"
    assert (
        "torchh'" not in detail and 'File "/shared/bad.py"' in detail and "^^^" not in detail and "\x1b" not in detail
    )


def test_local_runs_are_jobs_for_status_logs_list_and_plot(tmp_path: Path) -> None:
    exp = tmp_path / "tiny.py"
    exp.write_text(
        "import os, json\n"
        "from slurm_rl import MetricsLog\n"
        "log = MetricsLog(os.environ['SLURM_RL_JOB_DIR'])\n"
        "[log.log(step=s, reward=s / 10) for s in range(3)]\n"
        "print('tiny ran')\n"
    )
    env = {"SLURM_RL_INDEX": str(tmp_path / "index.jsonl"), "HOME": str(tmp_path), "COLUMNS": "80"}
    run = run_cli("run", str(exp), env=env, cwd=tmp_path)
    assert run.returncode == 0 and "tiny ran" in run.stdout, run.stderr
    run_id = json.loads((tmp_path / "index.jsonl").read_text().splitlines()[-1])["job_id"]
    assert run_id.startswith("local-") and f"slurm-rl logs {run_id}" in run.stderr
    listed = run_cli("list", env=env)
    assert listed.returncode == 0 and run_id in listed.stdout and "state" in listed.stdout.splitlines()[0]
    assert "COMPLETED" in listed.stdout and max(len(line) for line in listed.stdout.splitlines()) <= 80
    status = run_cli("status", run_id, "--json", env=env)
    assert json.loads(status.stdout)["state"] == "COMPLETED"
    table = run_cli("status", env=env).stdout
    assert run_id in table and max(len(line) for line in table.splitlines()) <= 80, table
    assert "tiny ran" in run_cli("logs", run_id, env=env).stdout
    plotted = run_cli("plot", run_id, env=env, timeout=120)
    assert plotted.returncode == 0 and plotted.stdout.split()[0].endswith("metrics.png"), plotted.stderr


def test_logs_of_a_node_the_job_never_had_lists_its_nodes(tmp_path: Path) -> None:
    paths = _job(tmp_path, exit_code=0)
    for node in ("node1", "node2"):
        paths.node_log(node).write_text("up\n")
    index = tmp_path / "index.jsonl"
    index.write_text(
        json.dumps({"job_id": 4242, "job_dir": str(paths.job_dir), "cluster": "lab", "submitted": 1}) + "\n"
    )
    res = run_cli("logs", "4242", "--node", "node9", env={"SLURM_RL_INDEX": str(index)})
    assert res.returncode == 2 and "no log of node 'node9'; its nodes: node1, node2" in res.stderr


def test_worker_tables_fit_80_columns(capsys: pytest.CaptureFixture[str]) -> None:
    rows = [
        {
            "worker": w,
            "name": f"policyworker0-{w}-0",
            "state": "alive",
            "node": "node2 (10.77.0.12)",
            "pid": 123456,
            "restarts": 0,
            "current_call": "train_step",
            "running_s": 12.5,
        }
        for w in range(3)
    ]
    print_table("worker status", rows)
    out = capsys.readouterr().out
    assert "train_step" in out and max(len(line) for line in out.splitlines()) <= 80


@pytest.mark.parametrize(
    ("ends", "state", "expected"),
    [
        ({"node1": "node_cleaned"}, "NODE_FAIL", "node2 lost: its node bootstrap never reported an end"),
        ({"node1": "node_cleaned", "node2": "node_stopped"}, "FAILED", "SIGTERM received on node1"),
        ({"node1": "node_cleaned"}, "RUNNING", "SIGTERM received on node1"),  # still ending: no verdict yet
        ({"node1": "stop_heard"}, "NODE_FAIL", "node2 lost: its node bootstrap never reported an end"),
    ],
    ids=["node2-died", "both-ended", "still-in-queue", "head-killed-after-it-heard-the-stop"],
)
def test_a_node_that_died_is_named_not_the_signal_the_others_got(
    tmp_path: Path, ends: dict[str, str], state: str, expected: str
) -> None:
    paths = _job(tmp_path)
    append_event(paths.events, "node_start", node="node1", rank=0, attempt=1)
    append_event(paths.events, "node_start", node="node3", rank=1, attempt=0)  # an earlier attempt's
    append_event(paths.events, "node_start", node="node2", rank=1, attempt=1)
    for node, event in ends.items():
        append_event(paths.events, event, node=node, attempt=1)
    record_exit(paths, 143, "SIGTERM received on node1 (scancel, time limit or preemption)")
    summary = summarize(paths, JobState(4242, state))
    assert summary.exit_reason.startswith(expected), summary.exit_reason


def test_a_node_that_failed_after_the_driver_finished_leaves_the_job_completed(tmp_path: Path) -> None:
    """Seen in the soak: the driver exited 0 with its answer, then a node of the job failed while
    the batch script ended; SLURM says NODE_FAIL, the job's work was done."""
    paths = _job(tmp_path)
    append_event(paths.events, "node_start", node="node1", rank=0, attempt=0)
    record_exit(paths, 0, "driver exited 0")
    summary = summarize(paths, JobState(4242, "NODE_FAIL", "node[1-3]"))
    assert (summary.state, summary.exit_code) == ("COMPLETED", 0)
    assert summary.exit_reason == "driver exited 0; then a node failed as the job ended (SLURM: NODE_FAIL)"


def test_a_node_that_failed_after_every_node_ended_leaves_the_jobs_own_failure_first(tmp_path: Path) -> None:
    """Seen in the soak (seed 42): a driver SIGKILLed, every node reported its end, then a node
    failed (a neighbour's fault) before SLURM ended the job: NODE_FAIL. The job failed of its own
    cause: FAILED, the driver's reason first, the node failure after it (it said "a node of the
    job failed ...; then: driver killed", as if the failure had come first). A node that never
    said how it ended is still named as the cause."""
    paths = _job(tmp_path)
    for rank, node in enumerate(("node1", "node2", "node3")):
        append_event(paths.events, "node_start", node=node, rank=rank, attempt=0)
        append_event(paths.events, "node_cleaned" if rank == 0 else "node_stopped", node=node, attempt=0)
    record_exit(paths, 137, "driver killed by signal SIGKILL")
    summary = summarize(paths, JobState(4242, "NODE_FAIL", "node[1-3]"))
    assert (summary.state, summary.exit_code) == ("FAILED", 137)
    then = "then a node failed as the job ended (SLURM: NODE_FAIL)"
    assert summary.exit_reason == f"driver killed by signal SIGKILL; {then}"
    assert summarize(paths, JobState(4242, "NODE_FAIL", "node[1-4]")).exit_reason.startswith("node4 failed (SLURM")


def test_a_step_that_could_not_start_on_one_node_names_it_not_the_nodes_srun_killed(tmp_path: Path) -> None:
    paths = _job(tmp_path)
    for rank, node in enumerate(("node1", "node2")):  # started; srun killed them when node3's launch failed
        append_event(paths.events, "node_start", node=node, rank=rank, attempt=0)
    record_exit(paths, 233, "the job step could not start on node3 (srun: Communication connection failure); ...")
    summary = summarize(paths, JobState(4242, "FAILED"))
    assert summary.exit_reason.startswith("the job step could not start on node3"), summary.exit_reason
    assert "lost" not in summary.exit_reason


def test_a_job_whose_head_died_with_everything_gets_its_exit_written_by_status(tmp_path: Path) -> None:
    """The head node failed: its batch script and bootstrap died before either could write the
    exit. The first `status` after SLURM ended the job writes it, so the job dir is complete;
    the reason is said once, however often it is read."""
    paths = _job(tmp_path)
    append_event(paths.events, "node_start", node="node1", rank=0, attempt=0)
    running = summarize(paths, JobState(4242, "RUNNING"))
    assert running.exit_code is None and not paths.exit_code.exists()  # in the queue: not known yet
    first = summarize(paths, JobState(4242, "NODE_FAIL"))
    assert first.exit_code == 1 and paths.exit_code.read_text() == "1\n"
    assert first.exit_reason.startswith("node1 lost: its node bootstrap never reported an end")
    assert first.exit_reason.endswith("then: NODE_FAIL") and first.exit_reason.count("lost:") == 1
    again = summarize(paths, JobState(4242, "NODE_FAIL"))
    assert (again.exit_code, again.exit_reason) == (first.exit_code, first.exit_reason)


def test_a_node_that_failed_before_its_bootstrap_said_anything_is_named(tmp_path: Path) -> None:
    """SLURM's NODE_FAIL while node2 was still coming up: node1 and node3 got SLURM's SIGTERM and
    said so; the job's reason names node2, not the signal (and is written once)."""
    paths = _job(tmp_path)
    for node in ("node1", "node3"):
        append_event(paths.events, "node_start", node=node, rank=0, attempt=0)
        append_event(paths.events, "node_stopped", node=node, attempt=0)
    record_exit(paths, 143, "SIGTERM received on node3 (scancel, time limit or preemption)")
    said = summarize(paths, JobState(4242, "NODE_FAIL", nodelist="node[1-3]"))
    assert said.exit_reason.startswith("node2 failed (SLURM: NODE_FAIL; `sinfo -N` shows its state); then: SIGTERM")
    assert summarize(paths, JobState(4242, "NODE_FAIL", nodelist="node[1-3]")).exit_reason == said.exit_reason


def test_an_oom_kill_a_node_reported_late_is_in_the_exit_reason_once(tmp_path: Path) -> None:
    paths = _job(tmp_path)
    record_exit(paths, 1, "driver exited 1")
    append_event(paths.events, "node_oom", node="node3", message="...", kills=1, limit="1500 MiB (--mem)")
    summary = summarize(paths, JobState(4242, "FAILED"))
    assert summary.exit_reason == (
        "driver exited 1; OOM: node3: the kernel's OOM killer killed 1 process(es) of the job at the node's "
        "limit of 1500 MiB (--mem)"
    )
    assert with_oom_kills(summary.exit_reason, read_events(paths.events)) == summary.exit_reason


def test_oom_kills_beside_a_job_that_survived_them(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Ray retried a task the kernel killed, the driver caught the error and exited 0: the job is
    COMPLETED, and status, list and --wait name the kills, their node, count and limit."""
    paths = _job(tmp_path, exit_code=0)
    for _ in range(4):
        append_event(paths.events, "node_oom", node="node3", kills=1, limit="1500 MiB (--mem)")
    summary = summarize(paths, JobState(4242, "COMPLETED"))
    assert (summary.state, summary.exit_code, summary.shown_state) == ("COMPLETED", 0, "COMPLETED (4 OOM kills)")
    assert summary.as_dict()["oom_kills"] == [{"node": "node3", "kills": 4, "limit": "1500 MiB (--mem)"}]
    assert "OOM: node3: the kernel's OOM killer killed 4 process(es)" in summary.exit_reason
    print_jobs([summary])
    out = capsys.readouterr().out
    assert "COMPLETED (4 OOM kills)" in out and "job 4242: OOM: node3: " in out and "1500 MiB (--mem)" in out


def test_a_preempted_job_says_it_was_preempted_not_only_the_signal(tmp_path: Path) -> None:
    """The soak (seed 113): a job on a node a higher-tier job took said only "SIGTERM received
    on node1 (scancel, time limit or preemption)"; SLURM knows it was preempted (PREEMPTED)."""
    paths = _job(tmp_path)
    record_exit(paths, 143, "SIGTERM received on node1 (scancel, time limit or preemption)")
    said = summarize(paths, JobState(4242, "PREEMPTED"))
    assert said.exit_reason.startswith("preempted by SLURM (a higher-priority job took its nodes); then: SIGTERM")
    assert summarize(paths, JobState(4242, "PREEMPTED")).exit_reason == said.exit_reason


def test_a_node_whose_slurm_rl_cannot_read_the_manifest_says_so_as_the_jobs_exit(tmp_path: Path) -> None:
    """The soak (an image whose slurm-rl was older than the submitter's): every node's bootstrap
    died on the manifest with a traceback in batch.log, and the job said only "the job step ended
    with exit 1". Now the first node writes the job's exit: its slurm-rl, and the fix."""
    import subprocess
    import sys

    paths = _job(tmp_path)
    data = json.loads(paths.manifest.read_text())
    paths.manifest.write_text(json.dumps({**data, "from_a_newer_slurm_rl": 1}))
    env = {**os.environ, "SLURM_JOB_ID": "4242", "SLURMD_NODENAME": "node1"}
    res = subprocess.run(
        [sys.executable, "-m", "slurm_rl.job.node", "--job-dir", str(paths.job_dir)],
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert res.returncode == 1 and "Traceback" not in res.stderr, res.stderr
    reason = paths.exit_reason.read_text()
    assert reason.startswith("node1: the slurm-rl on this node (") and "cannot read the job's manifest" in reason
    assert reason.strip().endswith("the nodes (the container image) need the slurm-rl that submitted the job")
    assert paths.exit_code.read_text() == "1\n"


def test_a_job_preempted_after_its_driver_exited_0_completed(tmp_path: Path) -> None:
    """The soak (seed 113, job #28): the driver had exited 0 and the batch script was ending when
    a higher-tier job took the node; SLURM says PREEMPTED, the work was done: COMPLETED, exit 0."""
    paths = _job(tmp_path, exit_code=0)
    said = summarize(paths, JobState(4242, "PREEMPTED"))
    assert (said.state, said.exit_code, said.exit_reason) == ("COMPLETED", 0, "driver exited 0")


def test_a_signal_that_comes_while_the_node_log_is_being_written_still_stops_the_node(tmp_path: Path) -> None:
    """Seen in CI at a time limit: SLURM's second signal came while the bootstrap was logging the
    first; Python raised "reentrant call inside BufferedWriter" in the handler, the bootstrap
    died before its cleanup and left its temp dir. Its line now goes past the buffer."""
    from types import SimpleNamespace

    from slurm_rl.job.context import NodeContext

    out = (tmp_path / "node.log").open("w")

    class Busy:  # a file whose buffer an interrupted write holds
        def write(self, _line: str) -> int:
            raise RuntimeError("reentrant call inside <_io.BufferedWriter name='node.log'>")

        def fileno(self) -> int:
            return out.fileno()

    NodeContext.say(SimpleNamespace(log=Busy(), node="node2", rank=1), "received SIGTERM")  # type: ignore[arg-type]
    out.close()
    assert (tmp_path / "node.log").read_text().endswith("node2 rank 1] received SIGTERM\n")
