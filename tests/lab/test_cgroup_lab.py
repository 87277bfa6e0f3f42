"""The lab as a cgroup site (`slurm-lab up --cgroup`: proctrack/cgroup, task/cgroup, memory
allocated and confined), as most GPU sites run SLURM: a clean end, a cancel, a lost node and the
memory limit. Marked cgroup_site: tests/lab/slurm-versions runs them on a lab it brings up with
--cgroup (SLURM 24.11's); on another lab the module switches it to cgroup mode and back (~35 s)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import LAB, run_cli
from tests.lab.helpers import (
    EXPERIMENTS,
    SPEC,
    assert_no_leftovers,
    job_cluster,
    lab_up,
    lab_up_args,
    last_json,
    start,
    submit,
    wait_gone,
    wait_ready,
)
from tests.lab.test_node_failure_lab import revive
from tests.lab.users import OTHER, USER, release, run_as, start_as

pytestmark = [pytest.mark.lab, pytest.mark.cgroup_site, pytest.mark.timeout(420)]
MIB = 2**20


@pytest.fixture(scope="module")
def cgroup_lab(lab: list[str]) -> Iterator[list[str]]:
    before = lab_up_args()
    lab_up(*[a for a in before if a != "--cgroup"], "--cgroup")
    try:
        yield lab
    finally:
        lab_up(*before)  # the lab as the rest of the suite had it


def test_clean_end_and_scancel_leave_nothing(cgroup_lab: list[str]) -> None:
    res, data = submit("exit_code.py", "0", nodes=3)
    assert res.returncode == 0 and data["exit_code"] == 0, res.stderr
    assert_no_leftovers(cgroup_lab, data["job_id"])
    held = start("hold.py", nodes=3)
    wait_ready(held)
    subprocess.run(["scancel", str(held["job_id"])], check=True, timeout=30)
    wait_gone(held["job_id"])
    assert_no_leftovers(cgroup_lab, held["job_id"])


def test_ray_plans_within_the_jobs_memory_and_an_oom_kill_is_named(cgroup_lab: list[str]) -> None:
    """Under a 1,500 MB per-node limit Ray's memory and object store fit the limit on every node
    (Ray alone would take the host's ~24 GB); a task allocating 2,000 MB on node3 is killed by
    the cgroup's OOM killer, and the job's exit reason says so, naming the node and the limit."""
    res, data = submit("memory_check.py", "2000", nodes=3, extra=("--mem", "1500M"), timeout=300)
    assert res.returncode == 1 and data, res.stderr  # `--wait` exits with the job's exit code
    driver = Path(data["job_dir"]) / "logs" / "driver.log"
    report = last_json(driver.read_text(), "per_node")  # after Ray's warning about the killed worker
    assert len(report["per_node"]) == 3
    for node, sizes in report["per_node"].items():
        assert 0 < sizes["memory"] + sizes["object_store_memory"] <= 1500 * MIB, (node, sizes)
    assert report["outcome"].startswith("died"), report
    assert data["exit_code"] == 1
    # what `status` (and `submit --wait`'s last line) says: the kill, its node and the limit
    reason = json.loads(run_cli("status", str(data["job_id"]), "--json").stdout.splitlines()[-1])["exit_reason"]
    assert "OOM: node3: " in reason and "1500 MiB" in reason, reason
    assert_no_leftovers(cgroup_lab, data["job_id"])


def test_oom_kills_are_reported_when_the_driver_survives_them(cgroup_lab: list[str]) -> None:
    """Ray retries the task the kernel kills (4 kills), the driver catches the error and exits 0:
    the job stays COMPLETED, and status, list, logs and --wait say memory, the node, how many
    times and the limit; the driver's own log says it beside Ray's error."""
    res, data = submit("memory_check.py", "2000", "survive", nodes=3, extra=("--mem", "1500M"), timeout=300)
    assert res.returncode == 0 and data["exit_code"] == 0 and data["state"] == "COMPLETED", res.stderr
    jid = str(data["job_id"])
    assert "OOM: node3: the kernel's OOM killer killed" in data["exit_reason"], data  # --wait's answer
    assert [k["node"] for k in data["oom_kills"]] == ["node3"], data
    status = json.loads(run_cli("status", jid, "--json").stdout.splitlines()[-1])
    [kills] = status["oom_kills"]
    assert kills["node"] == "node3" and kills["kills"] >= 2 and "1500 MiB" in kills["limit"], status
    table = run_cli("status", jid).stdout
    assert "OOM kill" in table and f"job {jid}: OOM: node3: " in table, table
    assert "OOM kill" in next(line for line in run_cli("list").stdout.splitlines() if line.startswith(jid))
    logs = run_cli("logs", jid)
    assert "slurm-rl: WARNING: OOM kill on node3" in logs.stdout and "OOM: node3" in logs.stderr, logs
    assert_no_leftovers(cgroup_lab, data["job_id"])


def test_another_users_oom_kill_leaves_a_users_job_whole(cgroup_lab: list[str]) -> None:
    """Two users on the same three nodes: OTHER's job is OOM-killed on node3 (its own cgroup's
    limit) while USER's job holds an actor on every node; OTHER's job ends naming the kill, and
    every actor of USER's job lives on (the same processes), until USER releases it and it
    completes. Neither leaves anything behind."""
    held = start_as(USER, "hold.py", "ok", extra=("--cpus-per-node", "1"))
    actors = wait_ready(held)
    res = run_as(
        OTHER, "submit", str(SPEC), str(EXPERIMENTS / "memory_check.py"), "--nodes", "3", "--json", "--wait",
        "--cpus-per-node", "1", "--mem", "1500M", "--", "2000", timeout=300,
    )  # fmt: skip
    data = json.loads(res.stdout.splitlines()[-1])
    assert res.returncode == 1 and "OOM: node3: " in data["exit_reason"], (res.stdout, res.stderr)
    assert sorted(job_cluster(data)["nodes"]) == sorted(job_cluster(held)["nodes"])  # the same nodes
    for host, pid in actors:  # USER's actors: the same processes, alive
        alive = subprocess.run([str(LAB), "exec", host, "--", "kill", "-0", str(pid)], capture_output=True, timeout=30)
        assert alive.returncode == 0, f"{USER}'s actor {pid} on {host} died with {OTHER}'s OOM kill"
    release(held, USER)
    wait_gone(held["job_id"], 120)
    state = json.loads(run_as(USER, "status", str(held["job_id"]), "--json").stdout.splitlines()[-1])
    assert state["state"] == "COMPLETED" and state["exit_code"] == 0, state
    assert_no_leftovers(cgroup_lab, held["job_id"])
    assert_no_leftovers(cgroup_lab, data["job_id"])


def test_a_gpu_job_may_open_only_its_own_device_files(cgroup_lab: list[str]) -> None:
    """ConstrainDevices: the job's device cgroup allows its own GPU's file (the open reaches the
    absent driver: ENXIO) and denies every other GPU's (EPERM); SLURM renumbers the job's
    CUDA_VISIBLE_DEVICES from 0, and its workers see that numbering."""
    from tests.lab.test_gpu_lab import SPEC_GPU, allocated, lab_gpus, reported

    if lab_gpus() < 2:
        pytest.skip("the lab has no GPUs: bring it up with --gpus 4 (the README's test command does)")
    res, data = submit("gpu_workers.py", "1", nodes=1, spec=SPEC_GPU, extra=("--gpus-per-node", "1"))
    assert res.returncode == 0, res.stderr[-3000:]
    report = reported(data)
    [ids] = allocated(report["scontrol"]).values()
    [own] = ids
    assert report["opens"][f"nvidia{own}"] == "ENXIO", report["opens"]
    assert {v for k, v in report["opens"].items() if k != f"nvidia{own}"} == {"EPERM"}, report["opens"]
    assert [w["cuda_visible_devices"] for w in report["workers"]] == ["0"], report["workers"]
    assert_no_leftovers(cgroup_lab, data["job_id"])


def test_a_lost_node_is_named_in_the_exit_reason(cgroup_lab: list[str]) -> None:
    data = start("hold.py", nodes=3)
    wait_ready(data)
    cluster = job_cluster(data)
    victim = next(n for n in cluster["nodes"] if n != cluster["head_node"])
    pid = subprocess.run([str(LAB), "pid", victim], capture_output=True, text=True, check=True).stdout.strip()
    try:
        subprocess.run(["kill", "-KILL", pid], check=True, timeout=10)  # the node and all on it: gone
        wait_gone(data["job_id"], 180)
        status = json.loads(run_cli("status", str(data["job_id"]), "--json").stdout.splitlines()[-1])
        assert status["exit_reason"].startswith(f"{victim} lost"), status
        assert_no_leftovers([n for n in cgroup_lab if n != victim], data["job_id"])
    finally:
        revive(victim)
