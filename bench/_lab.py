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

sys.path.insert(0, str(REPO))  # the lab's own helper for its users (standard library only)
from tests.lab.become import user_argv

SPEC_PYXIS = REPO / "cluster_specs" / "lab-pyxis.json"  # the same jobs in containers (`slurm-lab up --pyxis`)


def as_user(user: str | None, argv: list[str]) -> list[str]:
    """``argv`` as ``user`` (one of the lab's, tests/lab/become.py) with its own HOME and this
    interpreter first on PATH; as it is for None."""
    return user_argv(user, argv) if user else argv


def submit(
    experiment: Path, nodes: int, *extra: str, timeout: float = 60, spec: Path = SPEC, user: str | None = None
) -> subprocess.CompletedProcess[str]:
    """`slurm-rl submit SPEC EXPERIMENT --nodes N --json EXTRA...` on the lab spec (as ``user``)."""
    argv = [sys.executable, "-m", "slurm_rl", "submit", str(spec), str(experiment), "--nodes", str(nodes), "--json"]
    return subprocess.run(as_user(user, [*argv, *extra]), capture_output=True, text=True, timeout=timeout, cwd=REPO)


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


class ProbeError(RuntimeError):
    """A probe that could not look (its command failed, or it did not finish): never read as
    "nothing left"."""


DONE = "probe: looked"  # the last line of a probe that ran to its end

# Every process whose environment carries the job's marker variable or whose command line names
# its temp dir; a process gone between listing and reading is skipped, anything else fails.
PIDS = """
import os, sys
job, me = sys.argv[1], os.getpid()
marker, temp = f"SLURM_RL_JOB_ID={job}".encode(), f"/tmp/srl-{job}".encode()
for pid in (p for p in os.listdir("/proc") if p.isdigit() and int(p) != me):
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            env = f.read().split(b"\\0")
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmd = f.read()
    except (FileNotFoundError, ProcessLookupError):
        continue
    if marker in env or temp in cmd:
        print(pid)
print(sys.argv[2])
"""


def probe(node: str, argv: list[str], what: str) -> list[str]:
    """ARGV's output lines in NODE, which must exit 0 and print DONE last (ProbeError otherwise)."""
    try:
        res = subprocess.run([str(LAB), "exec", node, "--", *argv], capture_output=True, text=True, timeout=30)
    except subprocess.TimeoutExpired as e:
        raise ProbeError(f"{what} on {node}: no answer in 30 s") from e
    lines = res.stdout.splitlines()
    if res.returncode != 0 or not lines or lines[-1] != DONE:
        raise ProbeError(f"{what} on {node} could not look: exit {res.returncode}: {res.stderr.strip()[-200:]}")
    return lines[:-1]


def job_pids(node: str, job_id: int | str) -> list[str]:
    """/proc entries on ``node`` carrying the job's marker variable or its temp dir."""
    return sorted(probe(node, [sys.executable, "-I", "-c", PIDS, str(job_id), DONE], "the process probe"))


def temp_dirs(node: str, job_id: int | str) -> list[str]:
    """The job's node-local temp dir on ``node`` (its Ray sessions), if it is still there."""
    script = f'd=/tmp/srl-{job_id}; if [ -e "$d" ]; then echo "$d"; fi; echo "{DONE}"'
    return probe(node, ["sh", "-c", script], "the temp dir probe")


def containers(node: str, job_id: int | str) -> list[str]:
    """The job's unpacked container filesystems on ``node`` (`enroot list`)."""
    out = probe(node, ["sh", "-c", f'enroot list && echo "{DONE}"'], "the container probe")
    return [c for line in out for c in line.split() if c.startswith((f"pyxis_{job_id}.", f"pyxis_{job_id}_"))]
