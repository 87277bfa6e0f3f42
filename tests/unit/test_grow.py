"""`slurm-rl grow` and `shrink` (login/grow_shrink.py) against stand-in SLURM answers: what grow
submits (the member script, never a node the job has or had, at most the time it has left,
none of the caller's SLURM_* variables), what it refuses before the queue, what a refusal by
SLURM leaves, and which members shrink takes; the driver's view (slurm_rl.members())."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from slurm_rl.config.spec import ClusterSpec
from slurm_rl.core.errors import UsageError
from slurm_rl.core.events import append_event, read_events
from slurm_rl.core.options import JobOptions
from slurm_rl.core.paths import JobPaths
from slurm_rl.driver.members import members, nodes
from slurm_rl.login.grow_shrink import grow, shrink
from slurm_rl.login.submission.plan import plan_job
from slurm_rl.login.submission.render import render_job
from slurm_rl.login.submission.submit import stage_job_dir
from slurm_rl.slurm import SlurmClient
from slurm_rl.slurm.runner import Completed

SPEC = ClusterSpec.model_validate({"cluster_name": "c", "fileroot": "/shared/jobs", "partition": "lab"})
SINFO = "lab*|node1|2|4000|(null)|infinite\n" + "".join(f"labspot|node{i}|2|4000|(null)|1:00:00\n" for i in range(1, 7))
QOS = "short|00:05:00|node=1|\n"  # sacctmgr: MaxWall 5 min, one node per job


class Slurm:
    """Answers by the command's first word (and squeue's job), records every call."""

    def __init__(self, sbatch: Completed, queue: str = "RUNNING|exp|10:00") -> None:
        self.sbatch, self.queue, self.calls = sbatch, queue, []  # type: ignore[var-annotated]

    def __call__(self, argv: Sequence[str], timeout_s: float) -> Completed:
        self.calls.append(list(argv))
        if argv[0] == "sinfo":
            return Completed(0, SINFO, "")
        if argv[0] == "squeue":
            return Completed(0, self.queue + "\n", "")
        if argv[0] == "sacctmgr":
            return Completed(0, QOS if "short" in argv else "", "")
        if argv[0] == "env":
            return self.sbatch
        raise AssertionError(f"unexpected SLURM call {argv}")


def job(tmp_path: Path, exclude: str | None = None) -> JobPaths:
    (tmp_path / "x.py").write_text("print('hi')\n")
    opts = JobOptions(experiment=str(tmp_path / "x.py"), nodes=2, user="u", name="exp", exclude=exclude)
    paths = JobPaths(tmp_path / "exp" / "77")
    paths.job_dir.parent.mkdir()
    stage_job_dir(paths, SPEC, opts, render_job(plan_job(SPEC, opts)), snapshot=False)
    paths.cluster.write_text(json.dumps({"address": "10.0.0.1:6379", "nodes": ["node1", "node2"], "attempt": 1}))
    return paths


def test_grow_submits_the_member_script_off_the_jobs_nodes_for_the_time_it_has_left(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    paths = job(tmp_path, exclude="bad1")
    append_event(paths.events, "replacement_joined", member=7, joined="node5", replaces="node2")  # a node it had
    monkeypatch.setenv("SLURM_JOB_ID", "12")  # the caller's own allocation: not the member's business
    slurm = Slurm(Completed(0, "901\n", ""), queue="RUNNING|exp|10:00")
    said: list[str] = []
    out = grow(77, paths, SlurmClient(slurm), 2, partition="labspot", time_limit="1:00:00", say=said.append)
    assert (out.member, out.slurm_job, out.time) == (1, 901, "10:00")
    [argv] = [c for c in slurm.calls if c[0] == "env"]
    assert argv[argv.index("SLURM_JOB_ID") - 1 : argv.index("SLURM_JOB_ID") + 1] == ["-u", "SLURM_JOB_ID"]
    assert f"SLURM_RL_JOB_DIR={paths.job_dir}" in argv and "SLURM_RL_MEMBER=1" in argv and "SLURM_RL_ATTEMPT=1" in argv
    sbatch = argv[argv.index("sbatch") :]
    for flag in ("--nodes=2", "--time=10:00", "--exclude=bad1,node1,node2,node5", "--partition=labspot"):
        assert flag in sbatch, sbatch
    assert sbatch[-1] == str(paths.member_script) and f"--output={paths.member_log(1)}" in sbatch
    assert "more than job 77 has left (10:00)" in said[0]
    assert (paths.members / "1.request").read_text() == "2 bad1,node1,node2,node5 grow\n"
    assert (paths.members / "1.job").read_text() == "901\n"
    [sub] = [e for e in read_events(paths.events) if e["event"] == "member_submitted"]
    assert sub["kind"] == "grow" and sub["slurm_job"] == "901"


def test_grow_refuses_before_the_queue_and_a_refusal_by_slurm_is_said_and_kept(tmp_path: Path) -> None:
    paths = job(tmp_path)
    # what the partition or QOS would refuse or strand, as submit says it (login/submission/preflight.py)
    for kwargs, said in [
        ({"partition": "gpu"}, "--partition 'gpu': SLURM has no such partition; `sinfo -s` lists them"),
        ({"nodes": 7, "partition": "labspot"}, "--nodes 7: partition 'labspot' has 6 nodes, the job needs 7"),
        ({"partition": "labspot", "time_limit": "2:00:00"}, None),  # capped to what the job has left: fits
        ({"qos": "short"}, "--time 10:00: QOS short allows at most 00:05:00 per job (MaxWall)"),
        ({"nodes": 2, "qos": "short", "time_limit": "5"}, "--nodes: the job needs 2 node in all, QOS short allows"),
    ]:
        nodes = kwargs.pop("nodes", 1)
        client = SlurmClient(Slurm(Completed(0, "1\n", "")))
        if said is None:
            assert grow(77, paths, client, nodes, **kwargs).slurm_job == 1  # type: ignore[arg-type]
            continue
        with pytest.raises(UsageError, match=re.escape(said)):
            grow(77, paths, client, nodes, **kwargs)  # type: ignore[arg-type]
    (tmp_path / "again").mkdir()
    paths = job(tmp_path / "again")  # a job with no member yet
    with pytest.raises(UsageError, match="job 77 is PENDING; grow needs a running job"):
        grow(77, paths, SlurmClient(Slurm(Completed(0, "1\n", ""), queue="PENDING|exp|10:00")), 1)
    assert not paths.members.exists() or not list(paths.members.glob("*.request"))  # nothing taken
    refusal = Completed(1, "", "sbatch: error: Batch job submission failed: Invalid qos specification\n")
    with pytest.raises(UsageError, match=r"sbatch refused the job: .*Invalid qos specification; nothing was submitted"):
        grow(77, paths, SlurmClient(Slurm(refusal)), 1, qos="nope")  # exit 2, as for submit
    assert "Invalid qos" in (paths.members / "1.error").read_text()
    assert [m.state for m in members_of(paths)] == ["refused"]
    with pytest.raises(UsageError, match="is a local run"):
        grow("local-1", paths, SlurmClient(Slurm(Completed(0, "1\n", ""))), 1)
    (paths.exit_code).write_text("0\n")
    with pytest.raises(UsageError, match="job 77 has ended"):
        grow(77, paths, SlurmClient(Slurm(Completed(0, "1\n", ""))), 1)


def members_of(paths: JobPaths, what=members) -> list:  # type: ignore[no-untyped-def]
    import os

    os.environ["SLURM_RL_JOB_DIR"] = str(paths.job_dir)
    try:
        return what()
    finally:
        del os.environ["SLURM_RL_JOB_DIR"]


def test_shrink_takes_grown_members_only_by_number_or_node(tmp_path: Path) -> None:
    paths = job(tmp_path)
    append_event(paths.events, "replacement_requested", member=1, replaces="node2")
    append_event(paths.events, "replacement_joined", member=1, joined="node3", replaces="node2")
    append_event(paths.events, "member_submitted", member=2, slurm_job="902", kind="grow")
    append_event(paths.events, "member_joined", member=2, joined="node4", kind="grow")
    gone = SlurmClient(lambda argv, t: Completed(0, "", "") if argv[0] == "squeue" else Completed(1, "", "no"))
    with pytest.raises(UsageError, match="replaces a lost node \\(--heal\\): only grown members shrink"):
        shrink(77, paths, gone, member=1)
    with pytest.raises(UsageError, match=r"no grown a member on node node9.*grown members: 2 \(node4\)"):
        shrink(77, paths, gone, node="node9")
    said: list[str] = []
    assert shrink(77, paths, gone, node="node4", say=said.append)["member"] == 2
    assert said == ["job 77: member 2 already left (UNKNOWN)"]
    [heal, grown] = members_of(paths)
    assert (heal.kind, heal.replaces, heal.nodes) == ("heal", "node2", ["node3"])
    assert (grown.kind, grown.slurm_job, grown.state, grown.nodes) == ("grow", 902, "joined", ["node4"])
    append_event(paths.events, "node_lost", lost="node2")
    assert members_of(paths, nodes) == ["node1", "node3", "node4"]  # the job's, less the lost one, then members'
    append_event(paths.events, "member_left", member=2, left="node4", why="shrunk", kind="grow")
    assert members_of(paths, nodes) == ["node1", "node3"]


def test_a_members_node_ending_is_not_the_jobs_phase_and_its_lines_read_well(tmp_path: Path) -> None:
    from slurm_rl.core.job_dir import read_job_dir
    from slurm_rl.login.reading.job_tables import healing_lines

    paths = job(tmp_path)
    append_event(paths.events, "node_up", node="node1", rank=0, attempt=0)
    append_event(paths.events, "driver_start", node="node1", rank=0, attempt=0)
    append_event(paths.events, "member_submitted", member=1, slurm_job="903", kind="grow")
    append_event(paths.events, "node_up", node="node3", rank=1000, attempt=0)
    append_event(paths.events, "member_joined", member=1, joined="node3", kind="grow")
    append_event(paths.events, "member_draining", member=1, nodes=["node3"], kind="grow")
    append_event(paths.events, "node_failed", node="node3", rank=1000, attempt=0, error="x")
    append_event(paths.events, "node_cleaned", node="node3", rank=1000, attempt=0)
    append_event(paths.events, "member_left", member=1, left="node3", why="shrunk", kind="grow")
    view = read_job_dir(paths)
    assert (view.phase, view.nodes_up) == ("driver_start", 1)
    assert [line.split(" ", 1)[1] for line in healing_lines(view.healing)] == [
        "member 1 is SLURM job 903",
        "node3 (member 1) joined",
        "member 1 draining for shrink: node3",
        "node3 (member 1) left: shrunk",
    ]


def test_a_member_is_up_from_its_join_and_a_node_that_rejoins_is_up_again(tmp_path: Path) -> None:
    """`grow` returns on the driver's ``member_joined``, which can come before the member node's
    own ``node_up`` (0.9 s in a lab run): `status` right after says the node is up. A member that
    left and a later member on the same node: the node is in the job again."""
    from slurm_rl.core.job_dir import read_job_dir

    paths = job(tmp_path)
    append_event(paths.events, "node_up", node="node1", rank=0, attempt=0)
    append_event(paths.events, "member_joined", member=1, joined="node3", kind="grow")
    assert read_job_dir(paths).nodes_up == 2
    append_event(paths.events, "node_up", node="node3", rank=1000, attempt=0)  # late: no double count
    assert read_job_dir(paths).nodes_up == 2
    append_event(paths.events, "member_left", member=1, left="node3", why="shrunk", kind="grow")
    assert read_job_dir(paths).nodes_up == 1
    append_event(paths.events, "member_joined", member=2, joined="node3", kind="grow")
    assert read_job_dir(paths).nodes_up == 2
    assert members_of(paths, nodes) == ["node1", "node2", "node3"]  # the driver's nodes() too


def test_on_member_change_hears_each_change_once_from_now_on_until_stopped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import threading

    from slurm_rl.driver.members import on_member_change

    paths = job(tmp_path)
    monkeypatch.setenv("SLURM_RL_JOB_DIR", str(paths.job_dir))
    append_event(paths.events, "member_joined", member=1, joined="node3", kind="grow")  # before: not heard
    heard: list[tuple[str, int]] = []
    got = threading.Event()

    def callback(e: dict) -> None:
        if e.get("member") == 0:
            raise ValueError("a driver's bug")  # said, and listening goes on
        heard.append((e["event"], e.get("member") or e.get("lost")))
        if len(heard) == 3:
            got.set()

    stop = on_member_change(callback, poll_s=0.05)
    append_event(paths.events, "node_up", node="node4", rank=2000)  # not a change
    append_event(paths.events, "member_joined", member=0, joined="node9", kind="grow")
    append_event(paths.events, "member_joined", member=2, joined="node4", kind="grow")
    append_event(paths.events, "member_left", member=1, left="node3", why="shrunk", kind="grow")
    append_event(paths.events, "node_lost", lost="node2", replacements_used=0, heal=1)
    assert got.wait(10), heard
    stop.set()
    append_event(paths.events, "member_left", member=2, left="node4", why="lost", kind="grow")
    # stopped: the change is not heard within the ten polls it would take at most
    assert not _within(lambda: len(heard) > 3, 10 * 0.05), heard
    assert heard == [("member_joined", 2), ("member_left", 1), ("node_lost", "node2")]


def _within(check, timeout_s: float) -> bool:  # type: ignore[no-untyped-def]
    """Whether CHECK comes true within TIMEOUT_S (a negative check waits this long for it)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.01)
    return bool(check())
