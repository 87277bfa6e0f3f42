"""Healing (--heal K) without a cluster: the head's loss watcher (job/member_watch.py) against a scripted
Ray node table, the batch script's member submission (templates/heal.sh.j2) against stand-in
SLURM commands, the member job's script, and the options' checks."""

from __future__ import annotations

import os
import stat
import subprocess
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from slurm_rl.config.spec import ClusterSpec
from slurm_rl.core.events import append_event, read_events
from slurm_rl.core.fields import FieldProblem
from slurm_rl.core.members import Request, claim_member, member_jobs
from slurm_rl.core.members import member_history as healing_history
from slurm_rl.core.options import JobOptions
from slurm_rl.core.paths import JobPaths
from slurm_rl.job.member_watch import MemberWatch
from slurm_rl.login.submission.plan import plan_job
from slurm_rl.login.submission.render import _env, finalize_files, render_job


def head(tmp_path: Path, heal: int = 1, timeout_s: float = 600.0, exclude: str | None = None) -> SimpleNamespace:
    paths = JobPaths(tmp_path / "job")
    paths.job_dir.mkdir()
    for rank, node, ip in ((0, "node1", "10.0.0.1"), (1, "node2", "10.0.0.2"), (2, "node3", "10.0.0.3")):
        append_event(paths.events, "node_start", node=node, ip=ip, attempt=0, rank=rank)
    ctx = SimpleNamespace(
        paths=paths,
        attempt=0,
        node="node1",
        nodes=["node1", "node2", "node3"],
        manifest=SimpleNamespace(heal=heal, heal_timeout_s=timeout_s, exclude=exclude),
        stop_flag=paths.stop_flag_for(0),
        failures=[],
        said=[],
    )
    ctx.say = ctx.said.append
    # as NodeContext.event: the head's own node, rank and attempt go with every event
    ctx.event = lambda name, **fields: append_event(paths.events, name, node="node1", rank=0, attempt=0, **fields)
    ctx.fail = lambda reason, cause=None: ctx.failures.append(reason)
    return ctx


ALL_UP = {"a": (True, "10.0.0.1"), "b": (True, "10.0.0.2"), "c": (True, "10.0.0.3")}


def test_a_lost_worker_is_asked_for_once_and_joins_as_member_one(tmp_path: Path) -> None:
    ctx = head(tmp_path, heal=1, exclude="node9")
    healer = MemberWatch(ctx, "10.0.0.1:6379")  # type: ignore[arg-type]
    healer.observe(ALL_UP)
    assert healer.alive == {"a": ("node1", 0), "b": ("node2", 1), "c": ("node3", 2)}
    healer.observe({**ALL_UP, "b": (False, "10.0.0.2")})
    healer.observe({**ALL_UP, "b": (False, "10.0.0.2")})  # still dead: not lost twice
    assert (ctx.paths.members / "1.request").read_text() == "1 node9,node1,node2,node3 heal\n"
    assert not ctx.failures
    healer.check_pending()
    assert not (ctx.paths.members / "1.joined").exists() and not ctx.failures
    # member 1's bootstrap says where it is before it starts Ray; then its Ray node is alive
    append_event(ctx.paths.events, "node_start", node="node4", ip="10.0.0.4", attempt=0, rank=1000)
    healer.observe({**ALL_UP, "b": (False, "10.0.0.2"), "d": (True, "10.0.0.4")})
    assert (ctx.paths.members / "1.joined").read_text() == "node4\n" and not healer.pending
    names = [e["event"] for e in read_events(ctx.paths.events) if e["event"] != "node_start"]
    assert names == ["node_lost", "replacement_requested", "replacement_joined"], names
    assert member_jobs(read_events(ctx.paths.events)) == [
        {
            "member": 1,
            "kind": "heal",
            "slurm_job": None,
            "replaces": "node2",
            "node": "node4",
            "nodes": ["node4"],
            "left": [],
            "state": "joined",
        }
    ]
    assert [h["event"] for h in healing_history(read_events(ctx.paths.events))] == names
    assert healer.alive["d"] == ("node4", 1000)


def test_nodes_leaving_once_the_driver_ended_are_no_loss(tmp_path: Path) -> None:
    ctx = head(tmp_path, heal=1)
    healer = MemberWatch(ctx, "x")  # type: ignore[arg-type]
    healer.observe(ALL_UP)
    ctx.paths.markers.mkdir()
    ctx.stop_flag.touch()  # node 0 says stop: every other node stops its Ray
    healer.observe({**ALL_UP, "b": (False, "10.0.0.2"), "c": (False, "10.0.0.3")})
    assert not ctx.failures and not healer.pending and not ctx.paths.members.exists()
    assert not [e for e in read_events(ctx.paths.events) if e["event"] == "node_lost"]


def test_a_requeued_jobs_member_numbers_go_on_after_the_earlier_attempts(tmp_path: Path) -> None:
    ctx = head(tmp_path, heal=1)
    ctx.paths.members.mkdir()
    for name in ("1.request", "1.job", "1.joined"):  # attempt 0's member
        (ctx.paths.members / name).write_text("x\n")
    healer = MemberWatch(ctx, "x")  # type: ignore[arg-type]
    healer.observe(ALL_UP)
    healer.observe({**ALL_UP, "c": (False, "10.0.0.3")})
    assert (ctx.paths.members / "2.request").exists() and list(healer.pending) == [2] and not ctx.failures


def test_past_k_replacements_the_job_fails_naming_the_node_and_the_limit(tmp_path: Path) -> None:
    ctx = head(tmp_path, heal=1)
    healer = MemberWatch(ctx, "x")  # type: ignore[arg-type]
    healer.observe(ALL_UP)
    healer.observe({**ALL_UP, "b": (False, "10.0.0.2")})
    healer.observe({**ALL_UP, "b": (False, "10.0.0.2"), "c": (False, "10.0.0.3")})
    [why] = ctx.failures
    assert "node3 was lost" in why and "--heal 1" in why and "node2, node3" in why
    assert not (ctx.paths.members / "2.request").exists()


def test_without_heal_a_lost_node_is_slurms_to_handle_but_a_grown_member_just_leaves(tmp_path: Path) -> None:
    ctx = head(tmp_path, heal=0)
    healer = MemberWatch(ctx, "x")  # type: ignore[arg-type]
    healer.observe(ALL_UP)
    # `slurm-rl grow` took member 1 (2 nodes); its nodes join, one after the other
    assert claim_member(ctx.paths.members, Request(2, "node1,node2,node3", "grow")) == 1
    for rank, node, ip in ((1000, "node4", "10.0.0.4"), (1001, "node5", "10.0.0.5")):
        append_event(ctx.paths.events, "node_start", node=node, ip=ip, attempt=0, rank=rank)
    grown = {"d": (True, "10.0.0.4"), "e": (True, "10.0.0.5")}
    healer.observe({**ALL_UP, **grown})
    (ctx.paths.members / "1.shrink").touch()
    healer.check_shrinks()  # no GCS here: the drain is best effort, said, and the cancel goes on
    assert (ctx.paths.members / "1.drained").read_text() == "node4 node5\n"
    healer.observe({**ALL_UP, "d": (False, "10.0.0.4"), "e": (False, "10.0.0.5")})
    healer.observe({**ALL_UP, "c": (False, "10.0.0.3")})  # the job's own node: SLURM ends the job
    assert not ctx.failures and not healer.pending
    events = read_events(ctx.paths.events)
    assert [(e["event"], e.get("joined") or e.get("left")) for e in events if e["event"] != "node_start"] == [
        ("member_joined", "node4"),
        ("member_joined", "node5"),
        ("member_draining", None),
        ("member_left", "node4"),
        ("member_left", "node5"),
    ]
    [member] = member_jobs(events)
    assert member["kind"] == "grow" and member["state"] == "left" and member["why"] == "shrunk"
    # a member number is never taken twice: the watcher's replacement comes after grow's
    assert claim_member(ctx.paths.members, Request(1, "", "heal")) == 2


def test_a_refused_member_or_one_that_never_joins_fails_the_job(tmp_path: Path) -> None:
    ctx = head(tmp_path, heal=2, timeout_s=0.2)
    healer = MemberWatch(ctx, "x")  # type: ignore[arg-type]
    healer.observe(ALL_UP)
    healer.observe({**ALL_UP, "b": (False, "10.0.0.2")})
    (ctx.paths.members / "1.error").write_text("sbatch: error: Invalid account or account/partition combination\n")
    healer.check_pending()
    assert "member job 1) failed: sbatch: error: Invalid account" in ctx.failures[-1]
    healer.observe({**ALL_UP, "b": (False, "10.0.0.2"), "c": (False, "10.0.0.3")})
    time.sleep(0.3)
    healer.check_pending()
    assert "node3 was lost and no replacement joined within 0.2 s (--heal-timeout" in ctx.failures[-1]


def _stub(bin_dir: Path, name: str, body: str) -> None:
    path = bin_dir / name
    path.write_text("#!/bin/bash\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)


def run_heal_loop(tmp_path: Path, sbatch_body: str, squeue_body: str, requests: dict[str, str]) -> Path:
    """The batch script's heal loop for ~2 s (a stand-in job step), over request files."""
    script = _env().get_template("heal.sh.j2").render(files=finalize_files(), heal=1, secrets=["HF_TOKEN"])
    helpers = _env().get_template("finalize.sh.j2").render(files=finalize_files(), member=True)
    paths = JobPaths(tmp_path / "job")
    paths.members.mkdir(parents=True)
    for n, text in requests.items():
        (paths.members / f"{n}.request").write_text(text)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _stub(bin_dir, "sbatch", sbatch_body)
    _stub(bin_dir, "squeue", squeue_body)
    env = {
        **os.environ,
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "SLURM_RL_JOB_DIR": str(paths.job_dir),
        "SLURM_JOB_ID": "42",
        "SLURM_JOB_NAME": "exp",
        "SLURM_NODELIST": "node[1-3]",
        "SLURM_RESTART_COUNT": "2",
        "HF_TOKEN": "secret",
        "OTHER": "kept",
    }
    body = f"{helpers}\n{script}\nsleep 2.5 & srun_pid=$!\nslurm_rl_heal_loop\n"
    subprocess.run(["bash", "-c", body], env=env, timeout=30, check=True)
    return paths.job_dir


def test_the_batch_script_submits_the_member_with_the_time_left_and_a_clean_environment(tmp_path: Path) -> None:
    job_dir = run_heal_loop(
        tmp_path,
        sbatch_body='cd "$SLURM_RL_JOB_DIR"; env | sort > sbatch.env; echo "$*" > sbatch.args; echo 77\n',
        squeue_body='case "$*" in *%L*) echo 1:23:45 ;; *) echo PENDING ;; esac\n',
        requests={"1": "1 node9,node2\n"},
    )
    assert (job_dir / "members" / "1.job").read_text() == "77\n"
    args = (job_dir / "sbatch.args").read_text()
    for part in ("--parsable", "--nodes=1", "--time=1:23:45", "--exclude=node9,node2", "--job-name=exp.member1"):
        assert part in args, args
    assert args.rstrip().endswith(f"{job_dir}/member.sh") and "member-1.log" in args
    env = dict(line.split("=", 1) for line in (job_dir / "sbatch.env").read_text().splitlines() if "=" in line)
    assert env["SLURM_RL_MEMBER"] == "1" and env["SLURM_RL_ATTEMPT"] == "2" and env["OTHER"] == "kept"
    assert "SLURM_JOB_ID" not in env and "SLURM_NODELIST" not in env and "HF_TOKEN" not in env
    [submitted] = [e for e in read_events(job_dir / "events.jsonl") if e["event"] == "member_submitted"]
    assert submitted["slurm_job"] == "77" and submitted["time"] == "1:23:45"


def test_a_refused_member_and_one_that_left_the_queue_unjoined_are_errors(tmp_path: Path) -> None:
    run_heal_loop(
        tmp_path / "t",
        sbatch_body='echo "sbatch: error: Batch job submission failed: Invalid qos specification" >&2; exit 1\n',
        squeue_body="exit 0\n",
        requests={"1": "1 -\n"},
    )
    members = tmp_path / "t" / "job" / "members"
    assert "Invalid qos specification" in (members / "1.error").read_text()
    # (the left-the-queue case in its own dir: a submitted member SLURM no longer knows)
    sub = tmp_path / "u"
    run_heal_loop(sub, sbatch_body="echo 78\n", squeue_body="exit 0\n", requests={"3": "1 -\n"})
    assert (sub / "job" / "members" / "3.job").read_text() == "78\n"
    # the next pass finds 78 gone before its node joined
    assert "ended before its node joined" in (sub / "job" / "members" / "3.error").read_text()


LAB_SPEC = ClusterSpec.model_validate(
    {"cluster_name": "c", "fileroot": "/shared/jobs", "partition": "gpu", "account": "proj", "qos": "normal"}
)


def test_the_member_script_keeps_where_and_as_whom_and_drops_what_makes_the_job(tmp_path: Path) -> None:
    opts = JobOptions(
        experiment=str(tmp_path / "x.py"), nodes=3, heal=2, user="u", name="exp", time="1:00:00",
        partition="gpu", account="proj", qos="normal", constraint="a100", mem="64G", gpus_per_node=4,
        dependency="afterok:1", nodelist="n[1-3]", mail_type="END", requeue=2, comment="mine",
    )  # fmt: skip
    job = render_job(plan_job(LAB_SPEC, opts))
    assert "slurm_rl_heal_loop &" in job.script and "#SBATCH --no-kill" in job.script
    assert "--no-kill \\" in job.script and "--kill-on-bad-exit=0" in job.script
    assert "slurm_rl_end_members" in job.script
    directives = [line for line in job.member_script.splitlines() if line.startswith("#SBATCH")]
    for kept in ("--partition=gpu", "--account=proj", "--qos=normal", "--constraint=a100", "--mem=64G",
                 "--gpus-per-node=4", "--no-requeue", "--ntasks-per-node=1"):  # fmt: skip
        assert f"#SBATCH {kept}" in directives, directives
    text = "\n".join(directives)
    for dropped in ("--dependency", "--nodelist", "--mail-type", "--requeue", "--comment", "--time", "--nodes",
                    "--job-name", "--output", "--signal"):  # fmt: skip
        assert f"{dropped}=" not in text and f"#SBATCH {dropped}\n" not in text + "\n", directives
    assert "slurm_rl_finalize" not in job.member_script and "USR2" not in job.member_script
    assert "slurm_rl.job.node" in job.member_script and "--no-kill" not in job.member_script
    # every job can grow (`slurm-rl grow`): its member script is staged with or without --heal
    assert render_job(plan_job(LAB_SPEC, opts.replace(heal=0))).member_script.count("slurm_rl.job.node") == 1
    assert render_job(plan_job(LAB_SPEC, opts.replace(heal=0, head_partition="cpu"))).member_script == ""  # a hetjob
    plain = render_job(plan_job(LAB_SPEC, opts.replace(heal=0))).script
    assert "--kill-on-bad-exit=1" in plain and "--no-kill" not in plain and "slurm_rl_heal_loop" not in plain


@pytest.mark.parametrize(
    ("changes", "says"),
    [
        ({"nodes": 1, "heal": 1}, "--nodes 2 or more"),
        ({"nodes": 2, "heal": 1, "head_partition": "cpu"}, "--head-partition"),
        ({"nodes": 2, "heal": -1}, ">= 0"),
        ({"nodes": 2, "heal": 1, "heal_timeout_s": 0}, "> 0 seconds"),
    ],
)
def test_heal_options_are_checked(changes: dict, says: str) -> None:
    with pytest.raises((FieldProblem, ValueError)) as info:
        JobOptions(experiment="/x.py", **changes)
    assert says in str(info.value)


def test_no_kill_in_the_escape_hatch_points_to_heal() -> None:
    with pytest.raises(ValueError) as info:
        JobOptions(experiment="/x.py", sbatch_args=("--no-kill",))
    assert "use --heal K instead" in str(info.value)
    with pytest.raises(ValueError) as info:
        JobOptions(experiment="/x.py", srun_args=("--no-kill",))
    assert "teardown depends on it" in str(info.value)


def test_a_container_members_steps_name_the_job_dir_it_joins_not_their_own_id(tmp_path: Path) -> None:
    spec = LAB_SPEC.model_copy(
        update={"container_runtime": "pyxis", "cpu_image": "/images/x.sqsh", "python": "python3"}
    )
    job = render_job(
        plan_job(spec, JobOptions(experiment=str(tmp_path / "x.py"), nodes=2, heal=1, user="u", name="exp"))
    )
    assert '--container-workdir="/shared/jobs/u/exp/${SLURM_RL_JOB_DIR##*/}"' in job.member_script
    assert "SLURM_JOB_ID" not in job.member_script and "srl-img-" in job.member_script  # the image cache too
    assert '--container-workdir="/shared/jobs/u/exp/$SLURM_JOB_ID"' in job.script


def test_finalize_cancels_a_pending_member_at_once_and_waits_for_a_running_one(tmp_path: Path) -> None:
    """The job's end (or requeue) ends its member jobs: a pending one is cancelled at once; a
    running one stops by itself when the head does (gone here at the second look)."""
    script = (
        _env()
        .get_template("finalize.sh.j2")
        .render(
            files=finalize_files(),
            requeue=0,
            requested_limit=20,
            chain=False,
            heal=1,
            node_temp="/tmp/x",
            runtime_leftovers="''",
        )
    )
    paths = JobPaths(tmp_path / "job")
    paths.members.mkdir(parents=True)
    (paths.members / "1.job").write_text("55\n")
    (paths.members / "2.job").write_text("56\n")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "calls"
    looks = tmp_path / "looks"
    _stub(bin_dir, "scancel", f'echo "scancel $*" >>{calls}\n')
    _stub(bin_dir, "scontrol", f'echo "scontrol $*" >>{calls}\n')
    # squeue: -t PD lists 55 (pending); the plain look lists 56 (running) once, then nothing
    _stub(bin_dir, "squeue", f'case "$*" in *"-t PD"*) echo 55 ;; *) echo x >>{looks}; '
          f'[ "$(wc -l <{looks})" -le 1 ] && echo 56 ;; esac; exit 0\n')  # fmt: skip
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "SLURM_RL_JOB_DIR": str(paths.job_dir),
           "SLURM_JOB_ID": "42", "SLURM_RESTART_COUNT": "0"}  # fmt: skip
    res = subprocess.run(["bash", "-c", f"{script}\nslurm_rl_finalize 0"], env=env, timeout=30)
    assert res.returncode == 0
    assert calls.read_text().splitlines() == ["scancel 55"]  # 56 ended by itself: never cancelled
    [ended] = [e for e in read_events(paths.events) if e["event"] == "members_ended"]
    assert ended["slurm_jobs"] == "55,56" and ended["cancelled"] == ""


def test_an_unexpected_error_stops_the_watch_and_is_said_never_silent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import threading

    import ray._raylet

    class Gcs:  # answers once with a node table the watch cannot read
        def __init__(self, address: str) -> None:
            pass

        def get_all_node_info(self, timeout: float) -> dict:
            return {"not a node id": None}

    monkeypatch.setattr(ray._raylet, "GcsClient", Gcs, raising=False)
    ctx = head(tmp_path)
    ctx.stop_requested = threading.Event()
    watch = MemberWatch(ctx, "x")  # type: ignore[arg-type]
    monkeypatch.setattr("slurm_rl.job.member_watch.POLL_S", 0.01)
    thread = threading.Thread(target=watch.run, daemon=True)
    thread.start()
    thread.join(10)
    assert not thread.is_alive()
    [said] = ctx.said
    assert said.startswith("the member watch (healing, members joining and leaving) stopped by an unexpected error")
    [event] = [e for e in read_events(ctx.paths.events) if e["event"] == "heal_error"]
    assert "AttributeError" in event["error"]
