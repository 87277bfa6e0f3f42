"""Container jobs on the lab's real Pyxis + enroot (`slurm-lab up --pyxis`), with an image whose
interpreter (/opt/slurm-rl/bin/python) the bare nodes lack: anything slurm-rl still ran outside
the container would fail here. Every way a job ends leaves 0 processes and 0 containers.

The jobs run side by side (each starts from the nodes' prepared copy of the image): a clean
3-node job submitted from a directory the image lacks, a driver exception, one job attached to
(inside its container, and from the login node through Ray Client) and torn down, one
scancelled, one that hits its time limit.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.lab import helpers
from tests.lab.container_contract import (
    assert_attach_runs_in_the_container,
    assert_cancelled_crashed_and_clean_end_right,
    ended,
)
from tests.lab.helpers import (
    CLIENT_DRIVER,
    STATE,
    in_queue,
    job_containers,
    job_leftovers,
    last_json,
    wait_for,
    wait_ready,
)
from tests.lab.helpers import SPEC_PYXIS as SPEC


def start(experiment: str, *args: str, nodes: int, extra: tuple[str, ...] = (), cwd: Path | None = None) -> dict:
    """A container job beside the others on the lab's nodes, on one CPU per node (its actors ask
    for none): the test's jobs take 7 of the lab's 12 CPUs together and leave room for the jobs
    of a test beside it (no --oversubscribe: tests/lab/sharing.py)."""
    return helpers.start(experiment, *args, nodes=nodes, extra=("--cpus-per-node", "1", *extra), spec=SPEC, cwd=cwd)


def unpacks(job_id: int) -> int:
    """How many times pyxis created a container filesystem for the job, on any node (slurmd logs)."""
    needle = f"pyxis: creating container filesystem: pyxis_{job_id}"
    return sum(log.read_text(errors="replace").count(needle) for log in (STATE / "log").glob("slurmd-*.log"))


def assert_nothing_left(nodes: list[str], job: dict) -> None:
    job_id = job["job_id"]
    assert wait_for(lambda: not job_leftovers(nodes, job_id) and not job_containers(nodes, job_id), 15), (
        job_leftovers(nodes, job_id),
        job_containers(nodes, job_id),
        helpers.last_words(job, nodes),
    )


@pytest.mark.lab_shared
@pytest.mark.as_lab_user  # unprivileged enroot, as every user of a site runs it
@pytest.mark.timeout(480)  # its time-limit job alone ends 60-90 s in; 260 s on a busy CI machine
def test_every_way_a_container_job_ends_leaves_no_process_and_no_container(pyxis_lab: list[str]) -> None:
    # a submit directory the image (and /tmp, which the container mounts) lacks
    outside = Path("/srv") / f"srl-submit-{os.getpid()}"
    outside.mkdir(parents=True, exist_ok=True)
    jobs: list[dict] = []
    try:
        timed = start("hold.py", "ok", nodes=1, extra=("--time", "1"))
        clean = start("container_check.py", "3", nodes=3, cwd=outside)
        crash = start("hold.py", "raise", nodes=1)
        attached = start("hold.py", "ok", nodes=1, extra=("--ray-client",))
        cancelled = start("hold.py", "ok", nodes=1)
        jobs = [timed, clean, crash, attached, cancelled]

        # attach runs inside the running container, with the job's environment
        wait_ready(attached, timeout_s=240)
        assert_attach_runs_in_the_container(attached["job_id"])
        # Ray Client from the login node into the container's Ray (its proxy runs in there)
        res = run_cli(
            "attach", str(attached["job_id"]), "--client", "--", sys.executable, "-c", CLIENT_DRIVER, "init_ray",
            timeout=120,
        )  # fmt: skip
        assert res.returncode == 0, res.stderr[-3000:]
        seen = last_json(res.stdout, "client")
        assert seen["client"] == "slurm_managed" and seen["nodes"] == 1 and seen["here"] not in pyxis_lab, seen
        t0 = time.monotonic()
        res = run_cli("teardown", str(attached["job_id"]), timeout=120)
        teardown_s = time.monotonic() - t0
        assert res.returncode == 0 and "cancelled" in res.stdout, res.stdout + res.stderr
        # the job started from the nodes' prepared copy of the image (the image cache): pyxis
        # unpacked nothing for it, and teardown's cleanup never starts the image again
        assert unpacks(attached["job_id"]) == 0
        assert teardown_s < 30, f"teardown of a container job took {teardown_s:.1f} s"
        assert_nothing_left(pyxis_lab, attached)

        assert_cancelled_crashed_and_clean_end_right(cancelled, crash, clean)

        assert "time limit" in ended(timed["job_id"], 240)["exit_reason"].lower()
        for job in (clean, crash, attached, cancelled, timed):
            assert_nothing_left(pyxis_lab, job)
    finally:
        outside.rmdir()
        for job in jobs:
            if in_queue(job["job_id"]):
                subprocess.run(["scancel", str(job["job_id"])], timeout=30, check=False)
