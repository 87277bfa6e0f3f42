"""`slurm-rl submit` on the real lab: one Ray cluster per job, exit codes, sharing, failures."""

from __future__ import annotations

import json
import subprocess
import threading
import time
from pathlib import Path

import pytest

from slurm_rl.core.events import read_events
from tests.conftest import hand_to_cli_user, run_cli
from tests.lab.helpers import (
    SPEC,
    exit_reason,
    job_cluster,
    job_dir,
    job_leftovers,
    start,
    submit,
    tagged_json,
    wait_for,
    wait_gone,
)

pytestmark = [pytest.mark.lab, pytest.mark.timeout(240)]


@pytest.mark.lab_shared
@pytest.mark.smoke  # on 22.05: a multi-node job through the text readers is the wait race's and the hetjob's
def test_three_node_job(lab: list[str]) -> None:
    res, data = submit("check_cluster.py", "3", nodes=3)
    assert res.returncode == 0, (res.stdout, res.stderr)
    jd = job_dir(data)
    report = tagged_json((jd / "logs" / "driver.log").read_text(), "REPORT")
    assert report["nodes"] == 3 and report["pidns"] == 3 and report["tags"]
    assert report["ips"] == ["10.77.0.11", "10.77.0.12", "10.77.0.13"]
    assert report["node_types"] == ["node_type:cpu"] * 3  # the spec's node_type_from_node_name, as Ray resources
    assert {"job_id", "job_dir", "nodes", "state"} <= set(data) and data["state"] == "COMPLETED"
    # the job dir holds what the README promises
    for name in (
        "sbatch.sh",
        "spec.json",
        "experiment.py",
        "cluster.json",
        "events.jsonl",
        "exit_code",
        "exit_reason",
        "logs/driver.log",
        "logs/batch.log",
        "logs/node-node1.log",
        "logs/node-node3.log",
    ):
        assert (jd / name).exists(), name
    cluster = job_cluster(data)
    assert cluster["head_node"] == "node1" and cluster["ready_time"] and len(cluster["nodes"]) == 3
    events = {e["event"] for e in read_events(jd / "events.jsonl")}
    assert {"submitted", "node_start", "node_up", "ready", "driver_start", "driver_end", "node_cleaned"} <= events
    assert (jd / "logs" / "ray" / "node2" / "raylet.out").exists()  # Ray's logs copied back
    # nothing of the job is left on any node
    assert wait_for(lambda: not job_leftovers(lab, data["job_id"]), 10), job_leftovers(lab, data["job_id"])
    # status --json has the same keys as submit --json
    st = run_cli("status", str(data["job_id"]), "--json", "--spec", SPEC)
    assert st.returncode == 0, st.stderr
    assert {"job_id", "job_dir", "nodes", "state"} <= set(json.loads(st.stdout.splitlines()[0]))


@pytest.mark.lab_shared
@pytest.mark.smoke
@pytest.mark.smoke_versions
def test_driver_exit_code_is_the_job_exit_code(lab: list[str]) -> None:
    res, data = submit("exit_code.py", "3", nodes=1)
    assert res.returncode == 3, (res.stdout, res.stderr)
    assert data["exit_code"] == 3 and "driver exited 3" in data["exit_reason"]
    out = subprocess.run(
        ["scontrol", "show", "job", str(data["job_id"])], capture_output=True, text=True, check=True
    ).stdout
    assert "ExitCode=3:0" in out


# not in the smoke set: its SLURM side (--oversubscribe, two jobs on a node) is the smoke set's
# test_scancel_one_of_two_jobs_sharing_nodes; what it adds (distinct ports) does not vary by SLURM
def test_two_jobs_share_nodes(lab: list[str]) -> None:
    results: dict[str, tuple] = {}

    def go(key: str) -> None:
        results[key] = submit("check_cluster.py", "2", nodes=2, extra=("--oversubscribe", "--name", f"share-{key}"))

    threads = [threading.Thread(target=go, args=(k,)) for k in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=200)
    (ra, da), (rb, db) = results["a"], results["b"]
    assert ra.returncode == 0 and rb.returncode == 0, (ra.stderr, rb.stderr)
    ca = job_cluster(da)
    cb = job_cluster(db)
    assert set(ca["nodes"]) & set(cb["nodes"]), "the jobs should have shared a node"
    assert ca["ports"]["gcs"] != cb["ports"]["gcs"]


def test_failing_node_fails_the_job_fast_and_names_it(lab: list[str], tmp_path) -> None:  # type: ignore[no-untyped-def]
    spec = json.loads(Path(SPEC).read_text())
    spec["setup"] = ['test "$(hostname)" != node2']
    bad_spec = tmp_path / "bad-node2.json"
    bad_spec.write_text(json.dumps(spec))
    t0 = time.monotonic()
    res = run_cli(
        "submit", str(bad_spec), "tests/lab/experiments/exit_code.py", "--nodes", "3", "--wait", "--", "0", timeout=120
    )
    elapsed = time.monotonic() - t0
    assert res.returncode == 1, (res.stdout, res.stderr)
    assert "node2" in res.stderr and "setup[0]" in res.stderr
    assert elapsed < 20, elapsed


@pytest.mark.lab_shared
def test_a_snapshot_is_what_a_queued_job_runs(lab: list[str], tmp_path: Path) -> None:
    """--snapshot copies the repository's tracked files at submit; an edit while the job waits
    in the queue (--begin) does not reach it; imports next to the experiment come from the copy."""
    from tests.unit.test_snapshot import git_repo

    repo = hand_to_cli_user(git_repo(tmp_path / "repo"))  # the user's own (git refuses another user's)
    # an absolute path: start() takes it as it is
    data = start(str(repo / "pkg" / "exp.py"), nodes=1, extra=("--snapshot", "--sbatch-arg=--begin=now+6"))
    (repo / "pkg" / "helper.py").write_text("VERSION = 'v2, edited after submit'\n")
    wait_gone(data["job_id"], timeout_s=120)
    log = (job_dir(data) / "logs" / "driver.log").read_text()
    assert "v1" in log and "v2" not in log, log[-2000:]
    assert (job_dir(data) / "code" / "pkg" / "helper.py").read_text() == "VERSION = 'v1'\n"
    assert exit_reason(data).startswith("driver exited 0")
