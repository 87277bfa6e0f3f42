"""What the benchmarks need from the lab, without importing the test suite: submit through the
real CLI, wait for a file, and count a job's processes on a node the way an admin would
(grep over /proc, independent of slurm-rl's own process discovery)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SPEC = REPO / "cluster_specs" / "lab.json"
LAB = REPO / "tests" / "lab" / "slurm-lab"
HOLD = REPO / "tests" / "lab" / "experiments" / "hold.py"  # a driver that holds an actor per node


SPEC_PYXIS = REPO / "cluster_specs" / "lab-pyxis.json"  # the same jobs in containers (`slurm-lab up --pyxis`)


def submit(
    experiment: Path, nodes: int, *extra: str, timeout: float = 60, spec: Path = SPEC
) -> subprocess.CompletedProcess[str]:
    """`slurm-rl submit SPEC EXPERIMENT --nodes N --json EXTRA...` on the lab spec."""
    argv = [sys.executable, "-m", "slurm_rl", "submit", str(spec), str(experiment), "--nodes", str(nodes), "--json"]
    return subprocess.run([*argv, *extra], capture_output=True, text=True, timeout=timeout)


def submit_json(experiment: Path, nodes: int, *extra: str, spec: Path = SPEC) -> dict:
    """`slurm-rl submit --json` without waiting: {"job_id", "job_dir", ...}."""
    res = submit(experiment, nodes, *extra, spec=spec)
    res.check_returncode()
    return json.loads(res.stdout.splitlines()[-1])


def wait_file(path: Path, timeout_s: float = 120) -> None:
    end = time.monotonic() + timeout_s
    while not (path.exists() and path.read_text().endswith("\n")):
        if time.monotonic() > end:
            raise TimeoutError(f"{path} did not appear within {timeout_s:g} s")
        time.sleep(0.1)


def job_pids(node: str, job_id: int | str) -> list[str]:
    """/proc entries on ``node`` carrying the job's marker variable or its temp dir."""
    script = (
        f"echo $$; grep -lzx SLURM_RL_JOB_ID={job_id} /proc/[0-9]*/environ; "
        f"grep -lz /tmp/srl-{job_id} /proc/[0-9]*/cmdline; true"
    )
    out = subprocess.run(
        [str(LAB), "exec", node, "--", "sh", "-c", script], capture_output=True, text=True, timeout=30
    ).stdout.splitlines()
    shell = out[0].strip() if out else ""  # this shell's own command line names the temp dir
    return sorted({line.split("/")[2] for line in out if line.startswith("/proc/")} - {"self", shell})


def temp_dirs(node: str, job_id: int | str) -> list[str]:
    """The job's node-local temp dir on ``node`` (its Ray sessions), if it is still there."""
    out = subprocess.run(
        [str(LAB), "exec", node, "--", "sh", "-c", f"ls -d /tmp/srl-{job_id} 2>/dev/null; true"],
        capture_output=True, text=True, timeout=30,
    ).stdout  # fmt: skip
    return out.split()


def containers(node: str, job_id: int | str) -> list[str]:
    """The job's unpacked container filesystems on ``node`` (`enroot list`)."""
    out = subprocess.run(
        [str(LAB), "exec", node, "--", "enroot", "list"], capture_output=True, text=True, timeout=30
    ).stdout.split()
    return [c for c in out if c.startswith((f"pyxis_{job_id}.", f"pyxis_{job_id}_"))]
