"""What every container runtime's lab test asserts the same way (test_containers_lab.py for
Pyxis, test_apptainer_lab.py for Apptainer): attach runs inside the running container with the
job's environment, and a scancelled, a crashed and a clean 3-node job each end as they should,
the clean one having run the image's interpreter on every node."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import run_cli
from tests.lab.helpers import last_json, wait_for, wait_gone, wait_ready

IMAGE_PYTHON = "/opt/slurm-rl/bin/python"  # the lab image's interpreter: the bare nodes lack it


def ended(job_id: int, timeout_s: float) -> dict:
    """`slurm-rl status --json` once the job has left the queue."""
    wait_gone(job_id, timeout_s)
    res = run_cli("status", str(job_id), "--json", timeout=60)
    return json.loads(res.stdout.splitlines()[-1])


def assert_attach_runs_in_the_container(job_id: int) -> None:
    """Bare `python` and `ray` are the image's (they exist there only), as for the job's driver,
    with the job's Ray address."""
    job = str(job_id)
    res = run_cli(
        "attach", job, "--", "python", "-c", "import os, sys; print(sys.executable, os.environ['RAY_ADDRESS'])",
        timeout=60,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    python, address = res.stdout.split()[-2:]
    assert python == IMAGE_PYTHON and address.count(":") == 1
    # Ray's own `ray status` says "No cluster status" until its monitor's first report, a few
    # seconds after every node joined (seen once, when the job started late and attach came at
    # once): a user retries, so does the test
    said: list[str] = []

    def ray_status_active() -> bool:
        res = run_cli("attach", job, "--", "ray", "status", timeout=90)
        said[:] = [res.stdout[-1500:] + res.stderr[-1500:]]
        assert res.returncode == 0, said[0]
        return "Active:" in res.stdout

    assert wait_for(ray_status_active, 30, poll_s=2), said[0]  # each try an attach: ~1 CPU-s


def assert_cancelled_crashed_and_clean_end_right(cancelled: dict, crash: dict, clean: dict) -> None:
    """scancel (CANCELLED), a driver that raises once released (exit 1), and a clean 3-node
    `container_check.py` job submitted from a directory the image lacks (exit 0, the image's
    python on every node, Ray's temp dir on node-local disk, the token and the spec's env)."""
    import subprocess

    wait_ready(cancelled, timeout_s=240)
    subprocess.run(["scancel", str(cancelled["job_id"])], check=True, timeout=30)
    assert ended(cancelled["job_id"], 120)["state"] in ("CANCELLED", "STOPPED")

    (Path(crash["job_dir"]) / "release").write_text("go\n")
    assert ended(crash["job_id"], 240)["exit_code"] == 1

    status = ended(clean["job_id"], 300)
    assert status["exit_code"] == 0, status
    report = last_json((Path(clean["job_dir"]) / "logs" / "driver.log").read_text(), "nodes")
    assert report["nodes"] == 3 and report["driver_python"] == IMAGE_PYTHON
    assert report["driver_cwd"] == clean["job_dir"]  # the job dir (mounted), not the submit dir
    assert report["ray_address"]
    for node in report["per_node"]:
        assert node["python"] == IMAGE_PYTHON
        assert node["temp_fs"] != "tmpfs", node  # Ray's temp dir is on node-local disk, not RAM
        assert node["token"] and node["spec_env"] == "0", node  # the job's token and the spec's env reach it
