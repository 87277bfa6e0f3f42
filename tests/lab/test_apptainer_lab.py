"""Container jobs on the lab's real Apptainer (`slurm-lab up --apptainer`: Debian sid's 1.4.5 in
the SLURM 26.05 rootfs), running the lab image Pyxis also runs (a squashfs file: Apptainer
mounts it as it is), whose interpreter (/opt/slurm-rl/bin/python) the bare nodes lack: anything
slurm-rl still ran outside the container would fail here. The contract the Pyxis jobs keep
(test_containers_lab.py), on the other runtime: every way a job ends leaves 0 processes, 0
Apptainer instances and no mount of the image; attach runs in the job's environment inside the
container; a requeue, a grown member and GPUs on the fake GPU lab work as in bare jobs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import LAB, REPO, run_cli
from tests.lab import helpers
from tests.lab.container_contract import (
    assert_attach_runs_in_the_container,
    assert_cancelled_crashed_and_clean_end_right,
    ended,
)
from tests.lab.helpers import (
    SPEC_APPTAINER,
    apptainer_missing,
    in_queue,
    job_leftovers,
    last_json,
    wait_for,
    wait_ready,
)

SPEC = Path(SPEC_APPTAINER)
IMAGE = "/var/cache/slurm-lab/images/slurm-rl-lab.sqsh"
NOT_PROBED = "not checked (`doctor --probe` submits one tiny job to check it)"


@pytest.fixture(scope="module")
def apptainer_lab(lab: list[str]) -> list[str]:
    why = apptainer_missing()
    if why:
        pytest.skip(why)
    res = subprocess.run([str(LAB), "image"], capture_output=True, text=True, timeout=600)  # slurm-rl as checked out
    assert res.returncode == 0, res.stderr
    return lab


def leftovers(nodes: list[str], loops: bool = False) -> dict[str, list[str]]:
    """What Apptainer holds on the lab's nodes: running instances (any user's); with ``loops``,
    loop devices backing the image (the kernel's: every node sees the same list, any job's)."""
    out: dict[str, list[str]] = {}
    for node in nodes:
        listed = subprocess.run(
            [str(LAB), "exec", node, "--", "apptainer", "instance", "list", "--all"],
            capture_output=True, text=True, timeout=30, check=True,
        ).stdout.splitlines()[1:]  # fmt: skip
        if listed:
            out[node] = listed
    if loops and (found := subprocess.run(["losetup", "-j", IMAGE], capture_output=True, text=True).stdout):
        out["loop devices"] = found.splitlines()
    return out


def assert_nothing_left(nodes: list[str], job: dict) -> None:
    job_id = job["job_id"]
    assert wait_for(lambda: not job_leftovers(nodes, job_id) and not leftovers(nodes), 20), (
        job_leftovers(nodes, job_id),
        leftovers(nodes),
        helpers.last_words(job, nodes),
    )


def start(experiment: str, *args: str, nodes: int, extra: tuple[str, ...] = (), **kw: object) -> dict:
    """An Apptainer job beside the others, on one CPU per node but for a GPU job (its workers'
    bundles take CPUs): the end-path test's jobs and its member take 9 of the lab's 12 CPUs and
    leave room for the jobs of a test beside it (no --oversubscribe: tests/lab/sharing.py)."""
    spec = str(kw.pop("spec", SPEC))
    cpus = () if "--gpus-per-node" in extra else ("--cpus-per-node", "1")
    return helpers.start(experiment, *args, nodes=nodes, extra=(*cpus, *extra), spec=spec, **kw)  # type: ignore[arg-type]


def gpu_spec(tmp_path: Path) -> Path:
    """The Apptainer spec with the GPU lab's GPUs (cluster_specs/lab-gpu.json's)."""
    spec = json.loads(SPEC.read_text())
    gpu = json.loads((REPO / "cluster_specs" / "lab-gpu.json").read_text())
    for key in ("gpus_per_node", "gpu_type_from_node_name", "node_type_from_node_name", "setup"):
        spec[key] = gpu[key]
    path = tmp_path / "lab-apptainer-gpu.json"
    path.write_text(json.dumps(spec))
    return path


@pytest.mark.lab_shared
@pytest.mark.as_lab_user  # Apptainer without root, as every user of a site runs it
@pytest.mark.timeout(480)  # its time-limit job alone ends 60-90 s in; 290 s on a busy CI machine
def test_every_way_an_apptainer_job_ends_leaves_nothing(apptainer_lab: list[str], tmp_path: Path) -> None:
    outside = Path("/srv") / f"srl-submit-apptainer-{os.getpid()}"  # a submit dir the image lacks
    outside.mkdir(parents=True, exist_ok=True)
    jobs: list[dict] = []
    try:
        timed = start("hold.py", "ok", nodes=1, extra=("--time", "1"))
        clean = start("container_check.py", "3", nodes=3, cwd=outside)
        crash = start("hold.py", "raise", nodes=1)
        attached = start("hold.py", "ok", nodes=1)
        cancelled = start("hold.py", "ok", nodes=1)
        requeued = start("flaky.py", nodes=1, extra=("--requeue", "1"))
        jobs = [timed, clean, crash, attached, cancelled, requeued]

        # attach: inside the container, with the job's environment
        wait_ready(attached, timeout_s=240)
        job = str(attached["job_id"])
        assert_attach_runs_in_the_container(attached["job_id"])
        # a member job (grow) starts the same container on another node and joins the job's Ray
        res = run_cli("grow", job, "--nodes", "1", "--wait", timeout=180)
        assert res.returncode == 0 and "member 1 joined on node" in res.stdout + res.stderr, res.stdout + res.stderr
        t0 = time.monotonic()
        res = run_cli("teardown", job, timeout=120)
        teardown_s = time.monotonic() - t0
        assert res.returncode == 0 and "cancelled" in res.stdout, res.stdout + res.stderr
        assert teardown_s < 30, f"teardown of an Apptainer job took {teardown_s:.1f} s"
        assert_nothing_left(apptainer_lab, attached)
        # GPUs on the fake GPU lab: SLURM's devices reach each worker inside the container (its
        # 4 CPUs fit now, beside the other jobs' 7, while those end)
        gpu = start("gpu_workers.py", "2", nodes=2, spec=gpu_spec(tmp_path), extra=("--gpus-per-node", "2"))
        jobs.append(gpu)

        assert_cancelled_crashed_and_clean_end_right(cancelled, crash, clean)

        assert ended(gpu["job_id"], 240)["exit_code"] == 0
        workers = last_json((Path(gpu["job_dir"]) / "logs" / "driver.log").read_text(), "workers")["workers"]
        assert len({(w["host"], w["cuda_visible_devices"]) for w in workers}) == 4, workers
        assert {w["cuda_visible_devices"] for w in workers} == {"0", "1"}, workers

        status = ended(requeued["job_id"], 240)
        assert status["exit_code"] == 0 and status["state"] == "COMPLETED", status
        assert "attempt 1" in (Path(requeued["job_dir"]) / "logs" / "driver.log").read_text()
        assert "time limit" in ended(timed["job_id"], 240)["exit_reason"].lower()
        for data in jobs:
            assert_nothing_left(apptainer_lab, data)
        # every job has ended: no mount of the image is left anywhere (a loop device backs each)
        assert wait_for(lambda: not leftovers(apptainer_lab, loops=True), 30), leftovers(apptainer_lab, loops=True)
    finally:
        outside.rmdir()
        for data in jobs:
            if in_queue(data["job_id"]):
                subprocess.run(["scancel", str(data["job_id"])], timeout=30, check=False)


@pytest.mark.lab_shared
def test_the_doctor_checks_apptainer_on_a_node_as_root(apptainer_lab: list[str]) -> None:
    """Root's view (root may still submit; an ordinary user's is test_users_lab's doctor test)."""
    res = as_root("doctor", str(SPEC), "--probe", "--json", timeout=180)
    checks = {c["name"]: c for c in map(json.loads, res.stdout.splitlines())}
    assert res.returncode == 0 and {c["status"] for c in checks.values()} == {"ok"}, checks
    assert checks["apptainer"]["found"] == "apptainer 1.4.5 on the node, starts containers as root", checks
    assert checks["python and ray"]["found"].startswith("Python 3.11")  # the image's, probed inside it
    res = as_root("doctor", str(SPEC), "--json", timeout=60)  # without --probe: said, not guessed
    said = {c["name"]: c for c in map(json.loads, res.stdout.splitlines())}
    assert said["apptainer"] == {"name": "apptainer", "status": "skip", "found": NOT_PROBED, "fix": ""}, said
    assert said["fuse"]["status"] == "skip", said


def as_root(*args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    """`slurm-rl ARGS` as this process's user (root on the lab), whatever the test's user is."""
    return subprocess.run(
        [sys.executable, "-m", "slurm_rl", *args], capture_output=True, text=True, timeout=timeout, check=False
    )
