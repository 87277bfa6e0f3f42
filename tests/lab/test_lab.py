"""The lab itself: nodes behave like separate machines; up is idempotent; host lists match."""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

import pytest

from slurm_rl.core.nodelist import expand_hostlist
from tests.conftest import LAB
from tests.lab.helpers import lab_up_args

pytestmark = pytest.mark.lab


def test_sbatch_three_nodes_are_three_machines(lab: list[str]) -> None:
    with tempfile.TemporaryDirectory(dir="/var/tmp") as d:
        out = Path(d) / "out.txt"
        script = Path(d) / "job.sh"
        # each task: its node name, IP, PID namespace, /tmp inode, and what /tmp holds after
        # writing its own marker there (a private /tmp shows only its own marker)
        script.write_text(
            "#!/bin/bash\n"
            "srun --ntasks-per-node=1 bash -c 'touch /tmp/lab-test-$SLURM_JOB_ID-$SLURM_NODEID; sleep 0.5; "
            'echo "$SLURMD_NODENAME $(hostname -I | cut -d" " -f1) $(readlink /proc/self/ns/pid) '
            '$(stat -c %d:%i /tmp) $(ls /tmp | grep -c lab-test-$SLURM_JOB_ID)"; '  # each /tmp its own filesystem
            "rm -f /tmp/lab-test-$SLURM_JOB_ID-*'\n"
        )
        subprocess.run(
            ["sbatch", "--wait", "-N", "3", "-o", str(out), str(script)], check=True, capture_output=True, timeout=60
        )
        rows = [line.split() for line in out.read_text().splitlines() if line.strip()]
    assert len(rows) == 3, rows
    assert len({r[0] for r in rows}) == 3  # three node names
    assert len({r[1] for r in rows}) == 3  # three IPs
    assert all(r[1].startswith("10.77.0.") for r in rows)
    assert len({r[2] for r in rows}) == 3  # three PID namespaces
    assert len({r[3] for r in rows}) == 3  # three /tmp
    assert all(r[4] == "1" for r in rows)  # each /tmp holds only its own marker


def test_up_again_is_a_no_op(lab: list[str]) -> None:
    before = {n: subprocess.run([str(LAB), "pid", n], capture_output=True, text=True, check=True).stdout for n in lab}
    # the same set-up as the running lab (a lab up with --pyxis stays one)
    res = subprocess.run([str(LAB), "up", *lab_up_args()], capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr
    assert "already up" in res.stderr
    after = {n: subprocess.run([str(LAB), "pid", n], capture_output=True, text=True, check=True).stdout for n in lab}
    assert before == after


@pytest.mark.parametrize(
    "hostlist", ["node[1-3]", "node1,node[2-3]", "NODE[01-02,05]", "gpu[008-011],cpu7", "r[1-2]n[1-2]", "node[9-11]"]
)
def test_hostlist_matches_scontrol(lab: list[str], hostlist: str) -> None:
    out = subprocess.run(
        ["scontrol", "show", "hostnames", hostlist], capture_output=True, text=True, check=True, timeout=10
    ).stdout.split()
    assert expand_hostlist(hostlist) == out


def test_exec_runs_inside_the_node(lab: list[str]) -> None:
    out = subprocess.run(
        [str(LAB), "exec", "node2", "--", "hostname"], capture_output=True, text=True, check=True, timeout=10
    ).stdout.strip()
    assert out == "node2"
    bad = subprocess.run([str(LAB), "exec", "node99", "--", "true"], capture_output=True, text=True, timeout=10)
    assert bad.returncode == 2 and "node99" in bad.stderr
