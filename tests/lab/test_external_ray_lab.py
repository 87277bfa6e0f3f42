"""A Ray cluster that already exists (NeMo Gym's ray_head_node_address, ReaL's cluster_type
"ray"): started by hand on node2 and node3 with a token, a driver on its head node (where Ray
drivers run) runs examples/grpo.py on it through a spec with cluster_type "ray". The job dir is
written; afterwards the cluster is intact (same daemons, every resource free again: the run's
actors and placement groups are gone)."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.conftest import LAB, REPO
from tests.lab.helpers import node_processes

pytestmark = [pytest.mark.lab, pytest.mark.timeout(400)]
RAY = str(Path(sys.executable).parent / "ray")
PORT = 6390


def on(node: str, *cmd: str, env: dict[str, str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(LAB), "exec", node, "--", *cmd], capture_output=True, text=True, timeout=timeout, env={**os.environ, **env}
    )


def raylets(node: str) -> list[str]:
    return sorted(p.split()[0] for p in node_processes(node) if "raylet" in p)


@pytest.fixture
def shared_tmp() -> Path:  # type: ignore[misc]
    """A directory every lab node sees (their /tmp is node-local)."""
    path = Path(tempfile.mkdtemp(prefix="srl-external-", dir="/var/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_a_driver_runs_on_an_existing_token_cluster_and_leaves_it_intact(lab: list[str], shared_tmp: Path) -> None:
    tmp_path = shared_tmp
    token = tmp_path / "token"
    token.write_text(secrets.token_hex(16))
    token.chmod(0o600)
    auth = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(token), "RAY_ADDRESS": ""}
    head = "10.77.0.12"
    common = ["--num-cpus=2", "--disable-usage-stats"]
    try:
        started = on(
            "node2",
            RAY,
            "start",
            "--head",
            f"--node-ip-address={head}",
            f"--port={PORT}",
            "--include-dashboard=false",
            "--temp-dir=/tmp/handmade-ray",
            *common,
            env=auth,
        )
        assert started.returncode == 0, started.stderr[-2000:]
        joined = on(
            "node3",
            RAY,
            "start",
            f"--address={head}:{PORT}",
            "--node-ip-address=10.77.0.13",
            "--temp-dir=/tmp/handmade-ray",
            *common,
            env=auth,
        )
        assert joined.returncode == 0, joined.stderr[-2000:]
        before = {n: raylets(n) for n in ("node2", "node3")}
        spec = tmp_path / "handmade.json"
        spec.write_text(
            json.dumps(
                {
                    "cluster_type": "ray",
                    "cluster_name": "handmade",
                    "fileroot": str(tmp_path / "runs"),
                    "ray_head_node_address": f"{head}:{PORT}",
                    "ray_auth_token_file": str(token),
                }
            )
        )
        run = on(
            "node2",
            sys.executable,
            "-m",
            "slurm_rl.login.cli",
            "run",
            "--spec",
            str(spec),
            str(REPO / "examples" / "grpo.py"),
            "--",
            "--steps",
            "2",
            "--no-plots",
            env={"RAY_ADDRESS": "", "PYTHONPATH": str(REPO)},
            timeout=300,
        )
        assert run.returncode == 0, (run.stdout[-3000:], run.stderr[-3000:])
        assert f"on the Ray cluster at {head}:{PORT}" in run.stderr
        [metrics] = list((tmp_path / "runs").rglob("metrics.jsonl"))
        assert len(metrics.read_text().splitlines()) == 2
        assert "policy-0-0" in run.stdout and "node" in run.stdout  # the run's workers, on the cluster's nodes

        # the cluster is intact: the same raylets, both nodes alive, nothing of the run holds resources
        probe = on(
            "node2",
            sys.executable,
            "-c",
            f"import json, ray; ray.init(address='{head}:{PORT}'); "
            "print(json.dumps([sum(n['Alive'] for n in ray.nodes()), ray.available_resources().get('CPU'), "
            "ray.cluster_resources().get('CPU')]))",
            env=auth,
            timeout=120,
        )
        assert probe.returncode == 0, probe.stderr[-2000:]
        assert json.loads(probe.stdout.splitlines()[-1]) == [2, 4.0, 4.0]
        assert {n: raylets(n) for n in ("node2", "node3")} == before
    finally:
        for node in ("node3", "node2"):  # a hand-made cluster is stopped by hand (nothing else runs there)
            on(node, RAY, "stop", "--force", env=auth)
