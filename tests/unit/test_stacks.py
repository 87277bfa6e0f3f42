"""Stacks and stalls (issue 58, parts 1, 3 and 5) without SLURM: real processes armed as a job's
are, a node's answer to a request, the grouped report, node 0's stall watch, the options'
checks and NCCL's evidence settings. The lab proves the whole path (tests/lab/test_stalls_lab.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from types import SimpleNamespace

import cloudpickle
import pytest

from slurm_rl.core import progress
from slurm_rl.core.events import read_events
from slurm_rl.core.option_rules import duration_seconds
from slurm_rl.core.paths import JobPaths
from slurm_rl.core.stacks import nccl_evidence_env, read_answers, report_path, request
from slurm_rl.core.stacks_report import render
from slurm_rl.distributed.worker_env.hygiene import setup_hook
from slurm_rl.job.stacks_watch import StacksWatch, capture
from slurm_rl.job.stall_watch import StallWatch
from tests.conftest import run_cli

# A process armed as the job's workers are (the setup hook, by value, as Ray ships it), then
# waiting in one of two places: "collective" (like peers blocked in an all_reduce) or "late"
# (the rank that never joined), with its RANK in its environment.
WORKER = textwrap.dedent(
    """
    import pickle, sys, threading, time
    pickle.load(open(sys.argv[1], "rb"))()
    def all_reduce_like(event):
        event.wait()
    def never_joins():
        time.sleep(600)
    if sys.argv[2] == "collective":
        all_reduce_like(threading.Event())
    else:
        never_joins()
    """
)


@pytest.fixture
def armed(tmp_path: Path):
    """Four armed processes on "this node": ranks 0, 2, 3 waiting together, rank 1 elsewhere."""
    stacks_dir = tmp_path / "node-stacks"
    hook = tmp_path / "hook.pkl"
    os.environ["SLURM_RL_STACKS_DIR"] = str(stacks_dir)
    try:
        hook.write_bytes(cloudpickle.dumps(setup_hook()))
    finally:
        del os.environ["SLURM_RL_STACKS_DIR"]
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    procs = []
    for rank, where in enumerate(["collective", "late", "collective", "collective"]):
        env = {**os.environ, "SLURM_RL_STACKS_DIR": str(stacks_dir), "RANK": str(rank), "SLURM_JOB_ID": "1"}
        env.pop("PYTHONPATH", None)
        procs.append(subprocess.Popen([sys.executable, str(script), str(hook), where], env=env, cwd=tmp_path))
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and len(list(stacks_dir.glob("*.txt"))) < 4:
        time.sleep(0.05)
    yield stacks_dir, procs
    for p in procs:
        p.kill()
        p.wait()


def test_a_node_answers_with_every_armed_process_and_the_odd_rank_comes_first(armed, tmp_path: Path) -> None:
    stacks_dir, procs = armed

    def settled() -> list:  # each process past its start, in the wait it was written to reach
        found = capture(str(stacks_dir), "node7")
        inner = {s.rank: (s.main or ["?"])[0].split(" (")[0] for s in found}
        return found if inner == {"0": "wait", "1": "never_joins", "2": "wait", "3": "wait"} else []

    deadline = time.monotonic() + 20
    found = settled()
    while not found and time.monotonic() < deadline:
        found = settled()
    assert sorted(s.pid for s in found) == sorted(p.pid for p in procs)
    by_rank = {s.rank: s for s in found}
    assert by_rank["1"].main[0].startswith("never_joins (") and "worker.py:" in by_rank["1"].main[0]
    assert by_rank["0"].main[0].startswith("wait (") and by_rank["0"].main[-2].startswith("all_reduce_like (")
    report = render("42", {"node7": found}, ["node8"], tmp_path / "stacks.txt")
    lines = report.splitlines()
    assert lines[0].startswith("stacks of job 42: 4 processes on 1 node(s)")
    groups = [line for line in lines if line and not line.startswith((" ", "stacks of"))]
    assert groups[0].startswith("1 worker: rank 1 on node7") and "differs from its peers" in groups[0]
    assert groups[1].startswith("3 workers: ranks 0,2,3 on node7")
    assert groups[-1].startswith("node8: no answer")
    # the processes were dumped, not harmed: all still running
    assert all(p.poll() is None for p in procs)


class MemoryBoard:
    """The head's GCS board's two calls, in memory (job/board.py; the lab runs the real one)."""

    def __init__(self) -> None:
        self.keys: dict[str, str] = {}

    def put(self, kind: str, value: str, rank: int | None = None) -> bool:
        self.keys[kind] = value
        return True

    def get(self, kind: str) -> str | None:
        return self.keys.get(kind)


def _node(job_dir: Path, name: str, rank: int, board: MemoryBoard | None) -> SimpleNamespace:
    return SimpleNamespace(node=name, rank=rank, paths=JobPaths(job_dir), board=board)


def test_node_0_passes_requests_on_through_the_board_and_each_named_node_answers_once(armed, tmp_path: Path) -> None:
    stacks_dir, procs = armed
    job_dir = tmp_path / "job"
    board = MemoryBoard()
    head = StacksWatch(_node(job_dir, "node7", 0, board), str(stacks_dir))  # type: ignore[arg-type]
    other = StacksWatch(_node(job_dir, "node8", 1, board), str(stacks_dir))  # type: ignore[arg-type]
    unjoined = StacksWatch(_node(job_dir, "node9", 2, None), str(stacks_dir))  # type: ignore[arg-type]
    rid = request(job_dir, "test")
    not_theirs = request(job_dir, "test", nodes=["node6"])
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and len(read_answers(job_dir, rid)) < 2:
        for w in (head, other, unjoined):
            w._next = 0.0
            w.poll()
        time.sleep(0.1)
    assert sorted(read_answers(job_dir, rid)) == ["node7", "node8"]  # node9 has no board yet
    assert len(read_answers(job_dir, rid)["node7"]) == len(procs)
    assert [r["id"] for r in json.loads(board.keys["stacks"])] == [rid, not_theirs]
    assert read_answers(job_dir, not_theirs) == {} and head.answered == other.answered == {rid}


def test_native_frames_come_from_py_spy_beside_the_interpreter(tmp_path: Path) -> None:
    from slurm_rl.job.stacks_watch import native_stack

    code = "import time\ndef waiting_here():\n    time.sleep(60)\nwaiting_here()\n"
    child = subprocess.Popen([sys.executable, "-c", code])  # our child: traceable under ptrace_scope 1 too
    try:
        time.sleep(1.0)
        dump = native_stack(child.pid)
    finally:
        child.kill()
        child.wait()
    assert "waiting_here (<string>:3)" in dump and "time_sleep" in dump, dump


def test_a_dead_process_file_is_dropped_and_an_unarmed_one_is_not_signalled(tmp_path: Path) -> None:
    d = tmp_path / "s"
    d.mkdir()
    (d / "999999.txt").write_text("# slurm-rl stacks pid=999999 main=0x1 role=worker\n")
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        (d / f"{sleeper.pid}.txt").write_text("not a dump file\n")
        assert capture(str(d), "n") == []
        assert not (d / "999999.txt").exists() and sleeper.poll() is None
    finally:
        sleeper.kill()


def _events(job_dir: Path) -> list[str]:
    return [e["event"] for e in read_events(job_dir / "events.jsonl")]


def _watch(job_dir: Path, action: str, timeout_s: float = 20) -> StallWatch:
    from slurm_rl.core.events import append_event

    def event(name: str, **fields: object) -> None:
        append_event(job_dir / "events.jsonl", name, node="node1", rank=0, attempt=0, **fields)

    return StallWatch(job_dir, "42", timeout_s, action, event, lambda line: None)


def test_no_stall_before_the_first_progress_then_stalled_and_ended_under_warn(tmp_path: Path) -> None:
    progress.record(tmp_path, "driver", "step 7", t=time.time() - 3600)  # an earlier attempt's
    watch = _watch(tmp_path, "warn")
    assert watch.poll() is None and _events(tmp_path) == []  # a long model load: no clock yet
    watch.started -= 31 * 60 + 5  # (the attempt began 31 min ago)
    progress.record(tmp_path, "driver", "step 1234", t=time.time() - 31 * 60)
    watch._next = 0.0
    assert watch.poll() is None  # warn: never a reason to stop
    [stalled] = [e for e in read_events(tmp_path / "events.jsonl") if e["event"] == "stalled"]
    assert stalled["last"] == "step 1234" and stalled["seconds"] >= 31 * 60 and stalled["action"] == "warn"
    assert Path(stalled["stacks"]).exists()  # no node to wait for here: the report at once
    line = progress.stall_line(stalled)
    assert line.startswith("stalled for 31 min (last progress: step 1234 at ") and line.endswith(stalled["stacks"])
    assert progress.open_stall(read_events(tmp_path / "events.jsonl")) == stalled
    progress.record(tmp_path, "driver", "step 1235")
    watch._next = 0.0
    watch.poll()
    assert _events(tmp_path) == ["stalled", "stall_ended"]
    assert progress.open_stall(read_events(tmp_path / "events.jsonl")) is None


def test_fail_waits_for_the_stacks_then_gives_the_reason(tmp_path: Path) -> None:
    from slurm_rl.core.events import append_event

    append_event(tmp_path / "events.jsonl", "node_start", node="node2", rank=1, attempt=0)
    watch = _watch(tmp_path, "fail")
    watch.started -= 30
    progress.record(tmp_path, "output", "driver output", t=time.time() - 25)
    assert watch.poll() is None  # stalled, the stacks asked for: node2 has not answered
    assert watch.rid is not None and not report_path(tmp_path, watch.rid).exists()
    (tmp_path / "stacks" / watch.rid).mkdir(parents=True, exist_ok=True)
    (tmp_path / "stacks" / watch.rid / "node2.json").write_text("[]\n")
    watch._next = 0.0
    reason = watch.poll()
    assert reason is not None and reason.startswith("stalled for 2") and "(last progress: driver output at " in reason
    assert report_path(tmp_path, watch.rid).read_text().startswith("stacks of job 42: 0 processes on 1 node(s)")


def test_a_report_still_waiting_for_a_node_is_written_when_the_job_ends(tmp_path: Path) -> None:
    """A warn stall that ended, then the job, before node2 answered (a busy machine): the report
    its ``stalled`` event names is written anyway, saying which node did not answer."""
    from slurm_rl.core.events import append_event

    append_event(tmp_path / "events.jsonl", "node_start", node="node2", rank=1, attempt=0)
    watch = _watch(tmp_path, "warn")
    watch.started -= 30
    progress.record(tmp_path, "output", "driver output", t=time.time() - 25)
    assert watch.poll() is None and watch.rid is not None and not report_path(tmp_path, watch.rid).exists()
    watch.flush()
    [stalled] = [e for e in read_events(tmp_path / "events.jsonl") if e["event"] == "stalled"]
    assert Path(stalled["stacks"]) == report_path(tmp_path, watch.rid) and Path(stalled["stacks"]).exists()
    assert "node2" in Path(stalled["stacks"]).read_text()


@pytest.mark.parametrize(
    "args, says",
    [
        (("--stall-timeout", "0"), "--stall-timeout '0': must be at least 20 s"),
        (("--stall-timeout=-5m",), "--stall-timeout '-5m': use a duration such as 30m, 90s or 1h"),
        (("--stall-timeout", "10s"), "must be at least 20 s"),
        (("--stall-action", "explode", "--stall-timeout", "30m"), "'explode' is not one of 'warn', 'fail', 'requeue'"),
        (("--stall-action", "fail"), "give --stall-timeout too"),
        (("--stall-timeout", "1m", "--stall-action", "requeue"), "add --requeue N"),
    ],
)
def test_bad_stall_values_exit_2_with_one_line(tmp_path: Path, args: tuple[str, ...], says: str) -> None:
    exp = tmp_path / "exp.py"
    exp.write_text("print(1)\n")
    res = run_cli("render", "cluster_specs/lab.json", str(exp), *args)
    assert res.returncode == 2, res.stdout + res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and says in res.stderr, res.stderr


def test_good_stall_values_reach_the_manifest_and_fail_is_never_requeued(tmp_path: Path) -> None:
    assert [duration_seconds(v) for v in ("20s", "90", "30m", "1h30m")] == [20, 90, 1800, 5400]
    exp = tmp_path / "exp.py"
    exp.write_text("print(1)\n")
    res = run_cli("render", "cluster_specs/lab.json", str(exp), "--stall-timeout", "20s", "--stall-action", "fail")
    assert res.returncode == 0, res.stderr
    assert '[[ $reason != "stalled "* ]]' in res.stdout  # --requeue's budget is not spent on a stall
    for action in ("warn", "requeue"):  # a stall under requeue goes through --requeue's budget
        plain = run_cli(
            "render",
            "cluster_specs/lab.json",
            str(exp),
            "--stall-timeout",
            "20s",
            "--stall-action",
            action,
            "--requeue",
            "1",
        )
        assert plain.returncode == 0 and '!= "stalled "' not in plain.stdout, plain.stderr
        assert '[ "$attempt" -lt 1 ]' in plain.stdout


def test_nccl_leaves_its_flight_record_in_the_job_dir(tmp_path: Path) -> None:
    env = nccl_evidence_env(tmp_path)
    assert env["TORCH_NCCL_TRACE_BUFFER_SIZE"] == "2000" and env["TORCH_NCCL_DUMP_ON_TIMEOUT"] == "1"
    assert env["TORCH_NCCL_DEBUG_INFO_TEMP_FILE"] == str(tmp_path / "nccl" / "flight_recorder_rank_")
    assert json.loads(json.dumps(env)) == env  # plain strings: they travel in environments
