"""teardown's pieces without a cluster: reading the per-node JSON lines, merging the forced and
the final pass per node, and building the cleanup step where the job ran (manifest)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from slurm_rl.config.spec import ClusterSpec
from slurm_rl.core.events import append_event, read_events
from slurm_rl.core.manifest import Container, JobManifest
from slurm_rl.core.paths import JobPaths
from slurm_rl.login.teardown import cleanup_command, merge_reports, parse_reports, teardown
from slurm_rl.slurm import Completed, SlurmClient
from slurm_rl.slurm.records import JobState


def test_parse_reports_keeps_only_node_reports() -> None:
    stdout = (
        'srun: warning: something\n{"node": "node1", "killed": []}\nnot json\n[1, 2]\n'
        '{"no_node": 1}\n{"node": "node2", "killed": [{"pid": 5}]}\n'
    )
    assert [r["node"] for r in parse_reports(stdout)] == ["node1", "node2"]


def test_merge_reports_adds_both_passes_per_node() -> None:
    forced = [
        {
            "node": "node2",
            "killed": [{"pid": 1, "name": "raylet", "signal": "KILL"}],
            "temp_dir_removed": False,
            "seconds": 0.5,
        }
    ]
    final = [
        {"node": "node1", "killed": [], "temp_dir_removed": True, "seconds": 0.25},
        {
            "node": "node2",
            "killed": [{"pid": 2, "name": "gcs_server", "signal": "TERM"}],
            "temp_dir_removed": True,
            "seconds": 0.25,
        },
    ]
    merged = merge_reports(forced, final)
    assert [m["node"] for m in merged] == ["node1", "node2"]
    assert [k["pid"] for k in merged[1]["killed"]] == [1, 2]
    assert merged[1]["temp_dir_removed"] and merged[1]["seconds"] == pytest.approx(0.75)
    assert merge_reports([], []) == []


def _manifest(container: Container) -> JobManifest:
    return JobManifest(
        slurm_rl_version="t",
        cluster_name="c",
        name="n",
        user="u",
        nodes=2,
        python="/shared/venv/bin/python",
        workdir="/w",
        experiment_src_dir="/w",
        container=container,
    )


def test_cleanup_of_a_bare_job_runs_its_python_with_its_temp_dir(tmp_path: Path) -> None:
    paths = JobPaths(tmp_path)
    _manifest(Container()).model_copy(update={"node_local_dir": "/scratch"}).write(paths.manifest)
    assert cleanup_command(paths, 42, 0.5) == [
        "/shared/venv/bin/python",
        *("-m", "slurm_rl.job.cleanup", "--job-id", "42", "--grace-s", "0.5", "--temp-dir", "/scratch/srl-42"),
    ]


@pytest.mark.parametrize("runtime", ["pyxis", "apptainer"])
def test_cleanup_of_a_container_job_is_plain_shell_on_the_bare_node(tmp_path: Path, runtime: str) -> None:
    """No python on the bare node, and the image is never started again (a real image takes
    minutes to unpack on every node): the cleanup is bash, run here for real."""
    paths = JobPaths(tmp_path)
    _manifest(Container(runtime=runtime, image="/img", mounts=("/a:/a",))).write(paths.manifest)
    argv = cleanup_command(paths, 4242, 1.0)
    assert argv[:2] == ["bash", "-c"] and argv[3:7] == ["slurm-rl-cleanup", "4242", "1.0", "/tmp/srl-4242"]
    temp = tmp_path / "srl-4242"
    temp.mkdir()
    # a stand-in enroot with this job's container and another job's (an id with the same prefix)
    bin_dir, removed = tmp_path / "bin", tmp_path / "removed"
    bin_dir.mkdir()
    (bin_dir / "enroot").write_text(
        '#!/bin/sh\n[ "$1" = list ] && printf "pyxis_4242.0\\npyxis_42421.0\\n"\n'
        f'[ "$1" = remove ] && echo "$3" >>{removed}\nexit 0\n'
    )
    (bin_dir / "enroot").chmod(0o755)
    marked = subprocess.Popen(["sleep", "60"], env={**os.environ, "SLURM_RL_JOB_ID": "4242"})
    by_path = subprocess.Popen(["bash", "-c", 'trap "" TERM; while :; do sleep 0.1; done', f"{temp}/x"])
    other = subprocess.Popen(["sleep", "60"], env={**os.environ, "SLURM_RL_JOB_ID": "42421"})
    try:
        env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
        out = subprocess.run([*argv[:6], str(temp), argv[7]], capture_output=True, text=True, timeout=30, env=env)
        report = json.loads(out.stdout)
        killed = {k["pid"]: k["signal"] for k in report["killed"]}
        assert killed == {marked.pid: "TERM", by_path.pid: "KILL"}, out.stderr
        assert report["temp_dir_removed"] is True and not temp.exists()
        # what the runtime left of this job on the node, and only of this job: Pyxis' container;
        # Apptainer's exec containers end with their processes, so it has nothing to remove
        mine = ["pyxis_4242.0"] if runtime == "pyxis" else []
        assert report["containers_removed"] == mine and (removed.read_text().split() if mine else []) == mine
        assert other.poll() is None  # another job's process (an id with the same prefix) lives
    finally:
        for p in (marked, by_path, other):
            p.kill()
            p.wait()


def test_the_node_cleanup_stops_an_unmarked_writer_in_the_temp_dir(tmp_path: Path) -> None:
    """A process that carries no marker but writes in the job's temp dir (Apptainer's unsquashfs,
    as a user, extracting the image there when the job is torn down) is killed, named in the
    report, and the dir is gone (it would recreate what rm removed)."""
    paths = JobPaths(tmp_path)
    _manifest(Container(runtime="apptainer", image="/img")).write(paths.manifest)
    argv = cleanup_command(paths, 4243, 1.0)
    temp = tmp_path / "srl-4243"
    (temp / "rootfs").mkdir(parents=True)
    writer = subprocess.Popen(  # argv and environment free of the job: only its cwd is there
        ["bash", "-c", 'cd "$D" && exec bash -c "while :; do mkdir -p a/b; touch a/b/f; done"'],
        env={k: v for k, v in os.environ.items() if k != "SLURM_RL_JOB_ID"} | {"D": str(temp / "rootfs")},
    )
    try:
        out = subprocess.run([*argv[:6], str(temp)], capture_output=True, text=True, timeout=30)
        report = json.loads(out.stdout)
        assert [k["pid"] for k in report["killed"]] == [writer.pid], (out.stdout, out.stderr)
        assert report["temp_dir_removed"] is True and not temp.exists()
        assert writer.wait(timeout=10) == -9
    finally:
        writer.kill()
        writer.wait()


def test_cleanup_of_a_job_dir_without_manifest_uses_this_python(tmp_path: Path) -> None:
    assert cleanup_command(JobPaths(tmp_path), 42, 1.0)[0] == sys.executable


class EndedJob(SlurmClient):
    """SLURM's answers for job 77, ended (COMPLETED on node1 and node2); records cleanup steps."""

    def __init__(self, paths: JobPaths) -> None:
        super().__init__()
        self.paths, self.steps = paths, []  # type: ignore[var-annotated]

    def job_state(self, job_id: int | str) -> JobState:
        return JobState(job_id, "COMPLETED", "node[1-2]")

    def job_output_path(self, job_id: int | str) -> str | None:
        return str(self.paths.job_dir / "logs" / "batch.log")

    def run_on_nodes(self, job_id, nodes, argv, timeout_s=60.0, srun_flags=()):  # type: ignore[no-untyped-def]
        self.steps.append(nodes)
        return Completed(0, "".join(json.dumps({"node": n, "killed": []}) + "\n" for n in nodes), "")


def test_teardown_of_an_ended_job_looks_only_where_its_bootstrap_did_not_clean_up(tmp_path: Path) -> None:
    """An ended job's node whose bootstrap cleaned up (node_cleaned) gets no cleanup step: nothing
    is left there, and a node full of other jobs would refuse the step ('Requested nodes are busy',
    seen on the lab when `teardown ARRAYID` came to a task that had ended cleanly). A node that
    never said so (lost with the job) is still cleaned."""
    spec = ClusterSpec.model_validate({"cluster_name": "c", "fileroot": str(tmp_path)})
    paths = JobPaths.for_job(str(tmp_path), "u", "n", 77)
    paths.job_dir.mkdir(parents=True)
    _manifest(Container()).write(paths.manifest)
    for node in ("node1", "node2"):
        append_event(paths.events, "node_start", node=node, attempt=0)
    append_event(paths.events, "node_cleaned", node="node1", attempt=0, killed=0)
    client = EndedJob(paths)
    report = teardown(spec, "u", 77, client)
    assert client.steps == [["node2"]]
    assert [(n["node"], n["cleaned_at_end"]) for n in report.per_node] == [("node1", True), ("node2", False)]
    append_event(paths.events, "node_cleaned", node="node2", attempt=0, killed=0)
    client.steps.clear()
    assert teardown(spec, "u", 77, client).killed_total == 0 and client.steps == []  # both clean: no step at all


class RunningWithMember(SlurmClient):
    """Job 77 running on node1 and node2, and its grown member 78 on node3; records, in order,
    each step (with the job whose allocation it ran in) and each scancel. A cancelled job stays in
    the queue for two more polls, as a job's end takes SLURM a moment."""

    def __init__(self) -> None:
        super().__init__()
        self.done: list[tuple] = []
        self.polls_left: dict[int, int] = {}

    def job_output_path(self, job_id: int | str) -> str | None:
        return None  # found under the fileroot

    def job_state(self, job_id: int | str) -> JobState:
        jid = int(job_id)
        nodes = "node[1-2]" if jid == 77 else "node3"
        if jid in self.polls_left:
            self.polls_left[jid] -= 1
            return JobState(jid, "COMPLETING" if self.polls_left[jid] > 0 else "CANCELLED", nodes)
        return JobState(jid, "RUNNING", nodes)

    def scancel(self, job_id: int | str) -> None:
        self.done.append(("scancel", int(job_id)))
        self.polls_left[int(job_id)] = 2

    def run_on_nodes(self, job_id, nodes, argv, timeout_s=60.0, srun_flags=()):  # type: ignore[no-untyped-def]
        self.done.append(("step", job_id, tuple(nodes)))
        return Completed(0, "".join(json.dumps({"node": n, "killed": [{"pid": 1}]}) + "\n" for n in nodes), "")


def test_teardown_stops_the_job_and_its_members_inside_their_allocations_before_cancelling_them(
    tmp_path: Path,
) -> None:
    """Each running job of the whole (the job, each member) is stopped from inside its own
    allocation first, then all are cancelled and waited for together: no cleanup step needs a
    new allocation afterwards, and no member's end waits behind another's (a grown Apptainer
    job's teardown took 53 s on a busy CI machine when the member was cancelled, waited for and
    then cleaned by a fresh step, one after the other)."""
    spec = ClusterSpec.model_validate({"cluster_name": "c", "fileroot": str(tmp_path)})
    paths = JobPaths.for_job(str(tmp_path), "u", "n", 77)
    paths.job_dir.mkdir(parents=True)
    _manifest(Container(runtime="apptainer", image="/img")).write(paths.manifest)
    for node in ("node1", "node2"):
        append_event(paths.events, "node_start", node=node, attempt=0)
    append_event(paths.events, "member_submitted", member=1, kind="grow", slurm_job="78")
    append_event(paths.events, "member_joined", member=1, kind="grow", joined="node3")
    client = RunningWithMember()
    report = teardown(spec, "u", 77, client)
    assert client.done == [
        ("step", 77, ("node1", "node2")),
        ("step", 78, ("node3",)),
        ("scancel", 77),
        ("scancel", 78),
    ]
    assert report.cancelled and report.nodes == ["node1", "node2", "node3"] and report.killed_total == 3
    assert all(left <= 0 for left in client.polls_left.values())  # both waited for, to the end
    cancels = [e for e in read_events(paths.events) if e["event"] == "teardown_cancel"]
    assert [(c.get("member"), c["state"]) for c in cancels] == [(None, "RUNNING"), (1, "RUNNING")]
