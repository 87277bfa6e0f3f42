"""`slurm-rl run`: the same experiment on an embedded local Ray, nothing left behind."""

from __future__ import annotations

import json
from pathlib import Path

import psutil
import pytest

from tests.conftest import REPO, run_cli

pytestmark = [pytest.mark.timeout(180), pytest.mark.ray]  # starts a local Ray: `pytest -m unit` skips it


def _local_spec(tmp_path: Path) -> Path:
    spec = tmp_path / "local.json"
    spec.write_text(json.dumps({"cluster_type": "local", "cluster_name": "local", "fileroot": str(tmp_path / "root")}))
    return spec


def test_run_example_on_local_ray(tmp_path: Path) -> None:
    res = run_cli(
        "run", str(REPO / "examples" / "hello.py"), "--spec", str(_local_spec(tmp_path)), env={"RAY_ADDRESS": ""}
    )
    assert res.returncode == 0, res.stderr
    assert "init_ray: local_new; 1 Ray node(s)" in res.stdout and "hello from" in res.stdout
    job_dirs = list((tmp_path / "root").glob("*/hello/local-*"))
    assert len(job_dirs) == 1
    jd = job_dirs[0]
    assert (jd / "exit_code").read_text().strip() == "0"
    assert "hello from" in (jd / "logs" / "driver.log").read_text()
    run_id = jd.name
    left = [p.pid for p in psutil.process_iter() if _marker(p) == run_id]
    assert left == []


def test_run_propagates_exit_code(tmp_path: Path) -> None:
    exp = tmp_path / "fail.py"
    exp.write_text("import sys\nprint('bye')\nsys.exit(4)\n")
    res = run_cli("run", str(exp), "--spec", str(_local_spec(tmp_path)))
    assert res.returncode == 4 and "bye" in res.stdout


def test_run_missing_experiment_exit_2(tmp_path: Path) -> None:
    res = run_cli("run", str(tmp_path / "nope.py"), "--spec", str(_local_spec(tmp_path)))
    assert res.returncode == 2 and "nope.py" in res.stderr


def _marker(p: psutil.Process) -> str | None:
    try:
        return p.environ().get("SLURM_RL_JOB_ID")
    except psutil.Error:
        return None
