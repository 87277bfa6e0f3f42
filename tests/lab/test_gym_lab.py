"""The real NeMo Gym (PyPI nemo-gym 0.4.0) on a 3-node slurm-rl job, its code unchanged: Gym's
code_gen verification (its own SPREAD Ray task) re-checks the rollouts Gym ships, as the job's
driver (a plain ``ray.init()``) and from an ``attach`` shell, with the job's token inherited;
the rewards equal the recorded ones, all 3 nodes had joined when Gym connected, and its tasks
ran beyond the driver's node (Ray's state API, through ``--dashboard``). Gym needs Python >=
3.12: the test runs where ``tests/lab/gym-venv`` built its environment (.ci/run does), fails in
CI without it, and skips, saying how to build it, elsewhere. The same check runs with every node
in a Pyxis container too: the Gym image carries that environment and its interpreter."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from slurm_rl.core.events import read_events
from tests.conftest import LAB, REPO, python_argv, run_cli
from tests.lab.helpers import (
    EXPERIMENTS,
    SPEC,
    SPEC_PYXIS,
    assert_no_leftovers,
    job_containers,
    job_dir,
    last_json,
    node_failures,
    wait_for,
    wait_gone,
)

pytestmark = [pytest.mark.lab, pytest.mark.lab_shared, pytest.mark.timeout(420)]
GYM_VENV = Path(os.environ.get("GYM_VENV", "/var/cache/slurm-lab/gym-venv"))
GYM_PYTHON = GYM_VENV / "bin" / "python"
RECORDED = [0.0, 1.0, 0.0, 0.0, 0.0]  # the rewards in Gym's environments/code_gen/data/example_rollouts.jsonl


@pytest.fixture(scope="module")
def gym_python() -> str:
    if not GYM_PYTHON.exists():
        if os.environ.get("CI"):  # .ci/run builds it: a CI run without the real Gym is a failed run
            pytest.fail(f"CI: {GYM_VENV} is missing; .ci/run builds it with tests/lab/gym-venv")
        pytest.skip(f"NeMo Gym needs Python >= 3.12: build its environment with tests/lab/gym-venv ({GYM_VENV})")
    return str(GYM_PYTHON)


def gym_cli(python: str, *args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    """slurm-rl from the Gym environment: the job's nodes run that interpreter."""
    return subprocess.run(
        python_argv("-m", "slurm_rl", *args, python=python), capture_output=True, text=True, timeout=timeout, cwd=REPO
    )


def seen(text: str) -> dict:
    return last_json(text, "driver_host")


def test_gym_code_gen_verification_on_three_nodes(lab: list[str], gym_python: str) -> None:
    experiment = str(EXPERIMENTS / "gym_codegen.py")
    flags = ("--nodes", "3", "--dashboard", "--wait", "--json")
    res = gym_cli(gym_python, "submit", SPEC, experiment, *flags, timeout=300)
    assert res.returncode == 0, (res.stdout[-2000:], res.stderr[-3000:])
    data = json.loads([line for line in res.stdout.splitlines() if line.startswith("{")][-1])
    driven = seen((job_dir(data) / "logs" / "driver.log").read_text())
    assert driven["rewards"] == driven["recorded"] == RECORDED, driven
    # every node had joined when Gym's driver connected; its SPREAD tasks ran beyond the driver's node
    assert driven["nodes_at_start"] == 3 and len(driven["task_nodes"]) >= 2, driven
    assert_no_leftovers(lab, data["job_id"])

    # the same from a shell inside an interactive job (`slurm-rl attach`): RAY_ADDRESS and the token inherited
    start = gym_cli(gym_python, "submit", SPEC, "--nodes", "3", "--dashboard", "--json", timeout=120)
    assert start.returncode == 0, start.stderr[-2000:]
    cluster = json.loads([line for line in start.stdout.splitlines() if line.startswith("{")][-1])
    jid = str(cluster["job_id"])
    try:
        events = job_dir(cluster) / "events.jsonl"
        ready = wait_for(lambda: any(e["event"] == "ready" for e in read_events(events)), 120)
        assert ready, f"job {jid} never ready: {node_failures(events)}"
        att = gym_cli(gym_python, "attach", jid, "--", gym_python, experiment, "1", timeout=240)
        assert att.returncode == 0, att.stderr[-3000:]
        attached = seen(att.stdout)
        assert attached["rewards"] == RECORDED and attached["nodes_at_start"] == 3, attached
        assert attached["driver_host"] == "node1", attached  # attach runs on the job's head node
    finally:
        subprocess.run(["scancel", jid], check=False, timeout=30)
    wait_gone(jid, timeout_s=90)
    assert_no_leftovers(lab, jid)


def test_gym_code_gen_in_containers_on_three_nodes(pyxis_lab: list[str], gym_python: str, tmp_path: Path) -> None:
    """The same check with every node in a container: the Gym image (`slurm-lab gym-image`) carries
    the Gym environment and its Python 3.12, the bare nodes do not need them."""
    built = subprocess.run([str(LAB), "gym-image"], capture_output=True, text=True, timeout=900)
    assert built.returncode == 0, built.stderr[-2000:]
    image = built.stdout.strip().splitlines()[-1]
    spec = {**json.loads(Path(SPEC_PYXIS).read_text()), "cpu_image": image, "gpu_image": image, "python": gym_python}
    spec_path = tmp_path / "lab-gym-pyxis.json"
    spec_path.write_text(json.dumps(spec))
    experiment = str(EXPERIMENTS / "gym_codegen.py")
    res = run_cli(
        "submit", str(spec_path), experiment, "--nodes", "3", "--dashboard", "--wait", "--json",
        timeout=400,
    )  # fmt: skip
    assert res.returncode == 0, (res.stdout[-2000:], res.stderr[-3000:])
    data = json.loads([line for line in res.stdout.splitlines() if line.startswith("{")][-1])
    driven = seen((job_dir(data) / "logs" / "driver.log").read_text())
    assert driven["rewards"] == driven["recorded"] == RECORDED, driven
    assert driven["nodes_at_start"] == 3 and len(driven["task_nodes"]) >= 2, driven
    started = [e for e in read_events(job_dir(data) / "events.jsonl") if e["event"] == "driver_start"]
    assert started and started[0]["argv"][0] == gym_python, started
    assert_no_leftovers(pyxis_lab, data["job_id"])
    assert not job_containers(pyxis_lab, data["job_id"])
