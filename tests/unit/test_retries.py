"""Retries by cause (core/retries.py, core/last_attempt.py): --retry-on's names and bad values, what
a value covers, finalize's decision (run in bash, tests/unit/test_finalize.py's way), and how the
previous attempt ended as slurm_rl.attempt() tells the driver."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from slurm_rl.core import causes as c
from slurm_rl.core.causes import Cause
from slurm_rl.core.events import read_events
from slurm_rl.core.exits import read_cause, read_exit, record_exit
from slurm_rl.core.last_attempt import LastAttempt, last_attempt
from slurm_rl.core.paths import JobPaths
from slurm_rl.core.retries import parse_retry_on, retry_on_problem
from tests.conftest import REPO, run_cli
from tests.unit.test_finalize import finalize

LAB_SPEC = str(REPO / "cluster_specs" / "lab.json")
EXP = str(REPO / "tests" / "lab" / "experiments" / "hold.py")


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--retry-on", "bogus", "--requeue", "1"], "--retry-on 'bogus': 'bogus' is not a cause to retry on; use"),
        (["--retry-on", "node,exit:x", "--requeue", "1"], "'exit:x': an exit code is exit:CODE"),
        (["--retry-on", "exit:0", "--requeue", "1"], "'exit:0': an exit code is 1..255"),
        (["--retry-on", "node"], "--retry-on 'node': retries within --requeue's budget: add --requeue N (N >= 1)"),
    ],
)
def test_a_bad_retry_on_exits_2_with_one_line_and_submits_nothing(argv: list[str], said: str) -> None:
    env = {k: v for k, v in os.environ.items() if k != "CLUSTER_SPEC_PATH"}
    res = run_cli("submit", LAB_SPEC, EXP, *argv, "--dry-run", env=env)
    assert res.returncode == 2 and res.stdout == "", res.stdout + res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and said in res.stderr, res.stderr


def test_families_and_exit_codes_cover_their_causes() -> None:
    retry = parse_retry_on("node, preempted,exit:3,collective")
    assert retry is not None
    for kind in (c.NODE_LOST, c.LAUNCH_FAILURE, c.PREFLIGHT, c.PREEMPTED, c.COLLECTIVE_TIMEOUT):
        assert retry.covers(Cause(kind, "node2"), 1), kind
    assert retry.covers(Cause(c.DRIVER_ERROR), 3) and not retry.covers(Cause(c.DRIVER_ERROR), 4)
    for kind in (c.DRIVER_KILLED, c.OOM, c.STALLED, c.CANCELLED, c.TIME_LIMIT, c.UNKNOWN):
        assert not retry.covers(Cause(kind), 3), kind
    assert not retry.covers(None, 3) and parse_retry_on(None) is None and parse_retry_on("") is None
    assert retry_on_problem("node,stalled,oom,ray,service,driver,exit:255,node_lost") is None


def test_the_first_attempt_has_no_last() -> None:
    assert last_attempt([], 0) == LastAttempt(0)


def test_a_retry_finalize_made_carries_its_cause() -> None:
    events = [
        {"event": "node_start", "node": "node1", "attempt": 0},
        {
            "event": "requeue",
            "attempt": 0,
            "exit_code": 1,
            "reason": "node3: ray start failed",
            "cause": "launch_failure node=node3",
        },
    ]
    last = last_attempt(events, 1)
    assert last == LastAttempt(1, Cause(c.LAUNCH_FAILURE, "node3"), "node3: ray start failed", 1, False)
    assert last.as_dict()["cause"]["text"] == "could not start on node3"


def test_an_attempt_slurm_requeued_by_itself_is_a_lost_node_or_a_preemption() -> None:
    started = [{"event": "node_start", "node": n, "attempt": 0} for n in ("node1", "node2")]
    lost = last_attempt([*started, {"event": "node_cleaned", "node": "node1", "attempt": 0}], 1)
    assert (lost.cause, lost.by_slurm) == (Cause(c.NODE_LOST, "node2"), True)
    heard = [{"event": "stop_heard", "node": n, "attempt": 0} for n in ("node1", "node2")]
    assert last_attempt([*started, *heard], 1).cause == Cause(c.PREEMPTED)


def test_the_driver_api_outside_a_job_is_attempt_0(monkeypatch: pytest.MonkeyPatch) -> None:
    import slurm_rl

    for name in ("SLURM_RL_JOB_DIR", "SLURM_RESTART_COUNT"):
        monkeypatch.delenv(name, raising=False)
    assert slurm_rl.attempt() == LastAttempt(0)


def test_a_retry_by_cause_goes_without_the_node_it_names(tmp_path: Path) -> None:
    """--retry-on node: a launch failure on node3 is retried, the job held, node3 excluded
    beside the job's own --exclude and any earlier bad node, then released."""
    paths = JobPaths(tmp_path / "job")
    record_exit(paths, 1, "node3: ray start failed", Cause(c.LAUNCH_FAILURE, "node3"))
    paths.bad_nodes.write_text("node5\n")
    rc, calls = finalize(tmp_path, srun_rc=1, requeue=2, retry_on="node,preempted", exclude="node9")
    assert rc == 1 and calls == [
        "scontrol requeuehold 42",
        "scontrol update JobId=42 ExcNodeList=node3,node5,node9",
        "scontrol release 42",
    ]
    event = read_events(paths.events)[-1]
    assert (event["event"], event["cause"], event["excluded"]) == ("requeue", "launch_failure node=node3", "node3")
    assert paths.bad_nodes.read_text().split() == ["node5", "node3"] and read_cause(paths) is None


def test_a_failure_retry_on_does_not_name_ends_the_job_and_says_so(tmp_path: Path) -> None:
    paths = JobPaths(tmp_path / "job")
    record_exit(paths, 1, "driver exited 1", Cause(c.DRIVER_ERROR))
    rc, calls = finalize(tmp_path, srun_rc=1, requeue=2, retry_on="node,preempted")
    assert (rc, calls) == (1, [])
    code, reason = read_exit(paths)
    assert code == 1 and reason == (
        "driver exited 1; not retried: its cause (driver_error) is not one --retry-on node,preempted names"
    )
    assert read_cause(paths) == Cause(c.DRIVER_ERROR)  # the cause stays the job's
    assert [e["event"] for e in read_events(paths.events)] == ["not_retried", "job_end"]


@pytest.mark.parametrize(("code", "retried"), [(3, True), (4, False)])
def test_a_drivers_own_exit_code_is_retried_when_named(tmp_path: Path, code: int, retried: bool) -> None:
    paths = JobPaths(tmp_path / "job")
    record_exit(paths, code, f"driver exited {code}", Cause(c.DRIVER_ERROR))
    rc, calls = finalize(tmp_path, srun_rc=code, requeue=1, retry_on="exit:3,stalled")
    assert rc == code and calls == (["scontrol requeue 42"] if retried else [])  # no node named: none excluded


def test_without_retry_on_a_node_fault_is_retried_without_that_node_and_other_causes_as_before(tmp_path: Path) -> None:
    paths = JobPaths(tmp_path / "job")
    record_exit(paths, 1, "out of memory", Cause(c.OOM, "node2"))  # memory is no node's fault: node2 stays
    assert finalize(tmp_path, srun_rc=1, requeue=1) == (1, ["scontrol requeue 42"])
    record_exit(paths, 1, "node1 lost", Cause(c.NODE_LOST, "node1"))
    assert finalize(tmp_path, srun_rc=1, requeue=2, attempt=1)[1][-2] == "scontrol update JobId=42 ExcNodeList=node1"


def test_a_bad_node_preflight_found_sends_the_job_again_without_it_whatever_the_requeue_budget(tmp_path: Path) -> None:
    paths = JobPaths(tmp_path / "job")
    record_exit(paths, 1, "preflight: node1 failed the check disk: ...", Cause(c.PREFLIGHT, "node1", check="disk"))
    rc, calls = finalize(tmp_path, srun_rc=1, requeue=0, preflight_exclude=True)
    assert rc == 1 and calls[:3] == [
        "scontrol update JobId=42 Requeue=1",  # submitted --no-requeue (--requeue 0)
        "scontrol requeuehold 42",
        "scontrol update JobId=42 ExcNodeList=node1",
    ]
    assert read_events(paths.events)[-1]["preflight"] is True
    record_exit(paths, 1, "preflight: node2 failed ...", Cause(c.PREFLIGHT, "node2", check="fabric"))
    assert finalize(tmp_path, srun_rc=1, requeue=0, attempt=1)[1] == calls  # --on-bad-node fail: no new call
