"""Lab lifecycle (marked lab_last: conftest runs it right after the four_nodes tests, on the lab as they left it,
4 nodes in the whole suite; it leaves the lab up as it found it): a lab whose processes were all killed (what a
stopped session leaves) comes back with `up`; `down` leaves nothing."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import psutil
import pytest

from tests.conftest import LAB, lab_nodes
from tests.lab.helpers import STATE, lab_up_args

pytestmark = [pytest.mark.lab, pytest.mark.lab_last, pytest.mark.timeout(300)]


def _lab(*args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(LAB), *args], capture_output=True, text=True, timeout=timeout)


def _lab_processes() -> list[str]:
    found = []
    for p in psutil.process_iter(["pid", "name", "cmdline"]):
        cmd = " ".join(p.info["cmdline"] or [])
        if p.info["name"] in ("slurmctld", "slurmd", "slurmdbd", "mariadbd", "munged", "tini") or (
            "slurmd -D -N node" in cmd
        ):
            found.append(f"{p.pid} {cmd}")
    return found


def _quick_job(n: int) -> None:
    out = subprocess.run(["srun", "-N", str(n), "hostname"], capture_output=True, text=True, timeout=60, check=True)
    assert sorted(out.stdout.split()) == [f"node{k}" for k in range(1, n + 1)]


def test_up_repairs_a_killed_lab_and_down_leaves_nothing(lab: list[str]) -> None:
    n = len(lab_nodes())  # the lab as it is now (the session's `lab` is as it was at the start)
    args = lab_up_args()  # the lab as it is (containers, accounting, cgroups): brought back the same
    # what a stopped session leaves: every process gone, namespaces/bridge/config/state/database still there
    for p in psutil.process_iter(["name"]):
        if p.info["name"] in ("slurmctld", "slurmdbd", "mariadbd", "munged") or (
            p.info["name"] == "tini" and "slurmd" in " ".join(p.cmdline())
        ):
            os.kill(p.pid, signal.SIGKILL)
    psutil.wait_procs([p for p in psutil.process_iter(["name"]) if p.info["name"] == "slurmctld"], timeout=5)
    up = _lab("up", *args)
    assert up.returncode == 0, up.stderr
    _quick_job(n)

    # daemons whose pid files are gone (an `up` that raced a `down`, or was killed before they
    # wrote them) are the lab's still: `down` finds them by their command lines
    for pidfile in ("run/slurmctld.pid", "run/slurmdbd.pid", "mariadb/run/mariadb.pid"):
        (STATE / pidfile).unlink(missing_ok=True)
    down = _lab("down")
    assert down.returncode == 0, down.stderr
    assert _lab_processes() == []
    netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert "srl-node" not in netns
    assert subprocess.run(["ip", "link", "show", "srlbr0"], capture_output=True).returncode != 0
    assert "# slurm-lab" not in Path("/etc/hosts").read_text()
    assert not STATE.exists()

    up = _lab("up", *args)  # leave the lab as we found it
    assert up.returncode == 0, up.stderr
    _quick_job(n)
