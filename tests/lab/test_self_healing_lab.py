"""Healing (--heal K) on a 4-node lab: a 3-node job runs a worker group with restarts; a worker
node fails as real ones do (`slurm-lab fail`: everything on it dies at once) in the middle of
its work. A member job brings up a replacement on the spare node, Ray places the lost bundle
there, the group restarts its worker on it and the work goes on with the right answers; the
events tell loss -> request -> member submitted -> joined -> workers restored, with timings.
A second loss past K=1 fails the job fast, saying why. Nothing stays on any node of the job or
of its member job. Failed nodes are revived after each test."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from slurm_rl.core.events import read_events
from tests.conftest import LAB, REPO, run_cli
from tests.lab.helpers import (
    SPEC_PYXIS,
    assert_no_leftovers,
    in_queue,
    job_cluster,
    job_containers,
    job_dir,
    start,
    wait_for,
    wait_gone,
)
from tests.lab.test_node_failure_lab import revive

pytestmark = [pytest.mark.lab, pytest.mark.four_nodes, pytest.mark.timeout(600)]


def fail(node: str) -> float:
    res = subprocess.run([str(LAB), "fail", node], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    return time.time()


def events_of(data: dict) -> list[dict]:
    return read_events(job_dir(data) / "events.jsonl")


def first(events: list[dict], name: str, **match: object) -> dict | None:
    return next((e for e in events if e.get("event") == name and all(e.get(k) == v for k, v in match.items())), None)


def test_a_lost_worker_is_replaced_the_work_goes_on_and_past_k_the_job_fails_fast(lab4: list[str]) -> None:
    job = start("heal_work.py", str(REPO), "100", nodes=3, extra=("--heal", "1", "--heal-timeout", "240"))
    ready = job_dir(job) / "driver_ready"
    assert wait_for(ready.exists, 150), f"the driver never got ready: {job_dir(job) / 'logs'}"
    cluster = job_cluster(job)
    head, nodes = cluster["head_node"], cluster["nodes"]
    assert sorted(ready.read_text().split()) == sorted(nodes) and len(nodes) == 3, (ready.read_text(), nodes)
    victim, second = [n for n in nodes if n != head]
    spare = next(n for n in lab4 if n not in nodes)
    failed: list[str] = []
    try:
        heal_json = job_dir(job) / "heal.json"
        assert wait_for(lambda: heal_json.exists() and len(json.loads(heal_json.read_text())["rounds"]) >= 2, 60)
        failed.append(victim)
        t_fail = fail(victim)

        def restored() -> bool:
            rounds = json.loads(heal_json.read_text())["rounds"]
            return any(spare in r["hosts"] for r in rounds[-1:])

        assert wait_for(restored, 240, poll_s=1), (
            json.loads(heal_json.read_text())["rounds"][-3:],
            [e for e in events_of(job) if e["event"] not in ("node_up",)][-12:],
        )
        events = events_of(job)
        lost = first(events, "node_lost", lost=victim)
        requested = first(events, "replacement_requested", replaces=victim)
        submitted = first(events, "member_submitted", member=1)
        started = first(events, "node_start", node=spare)  # the member's bootstrap, before its Ray
        joined = first(events, "replacement_joined", member=1)  # its Ray node alive, as the head saw it
        restored_at = first(events, "workers_restored")
        assert lost and requested and submitted and started and joined and restored_at, [e["event"] for e in events]
        assert lost["t"] <= requested["t"] <= submitted["t"] <= started["t"] <= restored_at["t"]
        # the head looks 4 times a second: it may see the node a moment after Ray placed work on it
        assert started["rank"] == 1000 and started["t"] <= joined["t"] <= restored_at["t"] + 1.0, (joined, restored_at)
        assert joined["joined"] == spare and victim in requested["exclude"], (joined, requested)
        last = json.loads(heal_json.read_text())["rounds"][-1]
        assert last["answers"] == [0, 1, 2] and sorted(last["hosts"]) == sorted([head, second, spare]), last
        print(
            f"{victim} failed: lost in Ray after {lost['t'] - t_fail:.1f} s, replacement ({spare}) alive in Ray "
            f"after {joined['t'] - t_fail:.1f} s, workers restored after {restored_at['t'] - t_fail:.1f} s"
        )
        status = json.loads(run_cli("status", str(job["job_id"]), "--json", timeout=60).stdout.splitlines()[-1])
        assert status["state"] == "RUNNING", status
        member = int(submitted["slurm_job"])
        assert [m["slurm_job"] for m in status["members"]] == [member], status.get("members")
        assert victim in json.dumps(status["healing"]) and spare in json.dumps(status["healing"]), status

        # a second loss with K=1 used: the job fails at once, naming the node and the limit
        failed.append(second)
        t_fail = fail(second)
        assert wait_for((job_dir(job) / "exit_code").exists, 60), "the job did not fail past --heal 1"
        print(f"{second} failed past --heal 1: the job failed {time.time() - t_fail:.1f} s later")
        # (SLURM holds the job, COMPLETING, until it declares the dead node down: not waited for)
        status = json.loads(run_cli("status", str(job["job_id"]), "--json", timeout=60).stdout.splitlines()[-1])
        assert status["exit_code"] == 1 and "--heal 1" in status["exit_reason"], status
        assert second in status["exit_reason"], status
        assert wait_for(
            lambda: (
                not subprocess.run(["squeue", "-h", "-j", str(member)], capture_output=True, text=True).stdout.strip()
            ),
            30,
        ), "the member job outlived its job"
        assert_no_leftovers([n for n in lab4 if n not in failed], job["job_id"], within_s=20)
    finally:
        if not (job_dir(job) / "exit_code").exists():
            run_cli("teardown", str(job["job_id"]), timeout=120)
        for node in failed:
            revive(node)


def test_healing_in_containers_replaces_the_node_and_leaves_no_container(
    lab4: list[str], pyxis_lab: list[str], tmp_path: Path
) -> None:
    spec = tmp_path / "lab-pyxis-heal.json"  # the lab's Pyxis spec, the checkout mounted (the test's workers)
    spec.write_text(json.dumps({**json.loads(Path(SPEC_PYXIS).read_text()), "default_mount": f"{REPO}:{REPO}"}))
    job = start("heal_work.py", str(REPO), "2", nodes=3, extra=("--heal", "1"), spec=str(spec))
    ready = job_dir(job) / "driver_ready"
    assert wait_for(ready.exists, 240), f"the driver never got ready: {job_dir(job) / 'logs'}"
    cluster = job_cluster(job)
    victim = next(n for n in cluster["nodes"] if n != cluster["head_node"])
    spare = next(n for n in lab4 if n not in cluster["nodes"])
    heal_json = job_dir(job) / "heal.json"
    try:
        assert wait_for(lambda: heal_json.exists() and len(json.loads(heal_json.read_text())["rounds"]) >= 2, 60)
        t_fail = fail(victim)
        wait_gone(job["job_id"], 300)
        status = json.loads(run_cli("status", str(job["job_id"]), "--json", timeout=60).stdout.splitlines()[-1])
        assert status["state"] == "COMPLETED" and status["exit_code"] == 0, status
        last = json.loads(heal_json.read_text())["rounds"][-1]
        assert last["answers"] == [0, 1, 2] and spare in last["hosts"] and victim not in last["hosts"], last
        events = events_of(job)
        joined, restored = first(events, "replacement_joined"), first(events, "workers_restored")
        assert joined and joined["joined"] == spare and restored, [e["event"] for e in events]
        print(
            f"in containers: replacement alive in Ray {joined['t'] - t_fail:.1f} s after {victim} failed, "
            f"workers restored after {restored['t'] - t_fail:.1f} s"
        )
        survivors = [n for n in lab4 if n != victim]
        assert_no_leftovers(survivors, job["job_id"])
        assert not job_containers(survivors, job["job_id"]), job_containers(survivors, job["job_id"])
    finally:
        run_cli("teardown", str(job["job_id"]), timeout=120)
        revive(victim)


@pytest.mark.parametrize("how", ["scancel", "teardown"])
def test_ending_a_healed_job_ends_its_member_and_leaves_nothing(lab4: list[str], how: str) -> None:
    job = start("heal_work.py", str(REPO), "1000", nodes=3, extra=("--heal", "1"))
    ready = job_dir(job) / "driver_ready"
    assert wait_for(ready.exists, 150), f"the driver never got ready: {job_dir(job) / 'logs'}"
    cluster = job_cluster(job)
    victim = next(n for n in cluster["nodes"] if n != cluster["head_node"])
    try:
        fail(victim)
        joined = job_dir(job) / "members" / "1.joined"
        assert wait_for(joined.exists, 120), [e["event"] for e in events_of(job)][-10:]
        member = int((job_dir(job) / "members" / "1.job").read_text())
        if how == "scancel":
            subprocess.run(["scancel", str(job["job_id"])], check=True, timeout=30)
        else:
            res = run_cli("teardown", str(job["job_id"]), "--json", timeout=180)
            assert res.returncode == 0, res.stderr
            report = json.loads(res.stdout.splitlines()[-1])
            assert joined.read_text().strip() in report["nodes"], report  # the member's node was cleaned too

        def member_gone() -> bool:
            out = subprocess.run(["squeue", "-h", "-j", str(member)], capture_output=True, text=True, timeout=10)
            return not out.stdout.strip()

        assert wait_for(member_gone, 60), f"member job {member} outlived `{how}` of its job"
        assert_no_leftovers([n for n in lab4 if n != victim], job["job_id"], within_s=30)
    finally:
        revive(victim)  # first: SLURM holds a job with a dead node in it until the node answers
        if in_queue(job["job_id"]):
            run_cli("teardown", str(job["job_id"]), timeout=120)
