"""`slurm-rl doctor` on the lab: all ✓ with --probe on the lab's spec, and each broken setting
its ✗ with the fix (one tiny probe job each; nothing is left behind)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from slurm_rl.core.paths import current_user
from tests.conftest import CLI_USER, LAB, REPO, cli_argv
from tests.lab.helpers import lab_spec, pyxis_missing

pytestmark = [pytest.mark.lab, pytest.mark.smoke, pytest.mark.smoke_versions, pytest.mark.timeout(300)]


def doctor(spec: Path, *args: str) -> tuple[int, dict[str, dict]]:
    res = subprocess.run(
        cli_argv("doctor", str(spec), "--json", *args), capture_output=True, text=True, timeout=240, cwd=REPO
    )
    checks = {c["name"]: c for c in map(json.loads, res.stdout.splitlines())}
    return res.returncode, checks


def test_doctor_probe_on_the_lab_spec_is_all_ok(lab: list[str], tmp_path: Path) -> None:
    rc, checks = doctor(lab_spec(tmp_path), "--probe")
    assert rc == 0 and {c["status"] for c in checks.values()} == {"ok"}, checks
    assert {"slurm", "partition", "account", "qos", "process tracking", "cgroup", "gpus"} <= set(checks)
    assert checks["container runtime"]["found"].startswith("none: every process runs on the bare nodes")
    assert {"probe job", "fileroot", "network", "ports", "python and ray"} <= set(checks)
    version = subprocess.run(["sinfo", "--version"], capture_output=True, text=True, check=True).stdout.split()[-1]
    assert checks["slurm"]["found"].startswith(f"SLURM {version};")
    fileroot = json.loads(lab_spec(tmp_path).read_text())["fileroot"]
    assert not list(Path(fileroot, CLI_USER["name"] or current_user(), ".doctor").iterdir())  # the user's own


def test_without_probe_nothing_is_submitted_and_node_checks_say_so(lab: list[str], tmp_path: Path) -> None:
    rc, checks = doctor(lab_spec(tmp_path))
    assert rc == 0
    assert checks["fileroot"]["status"] == "skip" and "--probe" in checks["fileroot"]["found"]


@pytest.mark.parametrize(
    ("fields", "check", "found", "fix"),
    [
        ({"partition": "nope"}, "partition", "'nope' does not exist (partitions: lab, ", "set the spec's 'partition'"),
        ({"account": "nope"}, "account", "'nope' is not one of {user}'s accounts (lab, rl", "set the spec's 'account'"),
        ({"qos": "nope"}, "qos", "'nope' is not allowed for {user} (high, normal", "set the spec's 'qos'"),
        # a node's /tmp is its own: what a node writes there, the login node never sees
        ({"fileroot": "/tmp/srl-doctor-private"}, "fileroot", "/tmp/srl-doctor-private is not shared", "shared"),
        ({"network_interface": "ib0"}, "network", "no interface ib0 on this node", "use an interface every node"),
    ],
)
def test_each_broken_setting_is_its_own_fail_with_the_fix(
    lab: list[str], tmp_path: Path, fields: dict, check: str, found: str, fix: str
) -> None:
    found = found.format(user=CLI_USER["name"] or current_user())  # whom the doctor runs as
    private = fields.get("fileroot")
    if private:  # a node-local path: the host's own copy is this test's, made fresh by the doctor
        shutil.rmtree(private, ignore_errors=True)
    try:
        rc, checks = doctor(lab_spec(tmp_path, **fields), "--probe")
    finally:
        if private:
            shutil.rmtree(private, ignore_errors=True)
    assert rc == 1, checks
    got = checks[check]
    assert got["status"] == "fail" and found in got["found"] and fix in (got["fix"] + got["found"]), got
    assert [c["name"] for c in checks.values() if c["status"] == "fail"] == [check], checks
    if check in ("partition", "account", "qos"):  # no probe job with what failed
        assert checks["fileroot"]["status"] == "skip" and "fix that first" in checks["fileroot"]["found"]


def test_the_pyxis_check_says_what_the_lab_has(lab: list[str], tmp_path: Path) -> None:
    spec = REPO / "cluster_specs" / "lab-pyxis.json"
    if pyxis_missing():  # the lab without containers (`up` without --pyxis)
        rc, checks = doctor(spec)
        assert rc == 1 and checks["pyxis"]["status"] == "fail", checks
        assert "no Pyxis in plugstack.conf, the spec wants it" in checks["pyxis"]["found"]
        assert "set container_runtime to 'none'" in checks["pyxis"]["fix"]
        return
    subprocess.run([str(LAB), "image"], capture_output=True, check=True, timeout=600)  # slurm-rl as checked out
    rc, checks = doctor(spec, "--probe")  # the probe runs in the image: its python, Ray and slurm-rl
    assert rc == 0 and {c["status"] for c in checks.values()} == {"ok"}, checks
    assert "spank_pyxis.so, container_scope=" in checks["pyxis"]["found"]
