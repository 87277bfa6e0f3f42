"""The soak's faults (bench/soak.py): what each does to a job, at which moment, and what the job
must say after it. FAULTS are the ones a short soak draws from (each ends within a minute);
``--all-faults`` adds the slow and lab-wide ones: the time limit (SLURM's floor is a minute)
and a node failed and revived (``slurm-lab fail``/``revive``: every job on it is caught, not
only the one aimed at, so a neighbour's end is judged by the node it names)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from _lab import LAB

FAULTS = (
    "exception", "driver_kill", "scancel_bringup", "scancel_run", "teardown_bringup", "teardown_run",
    "raylet_kill", "gcs_kill",
)  # fmt: skip
LONG_FAULTS = ("time_limit", "node_fail")
RAY_KILLS = {"raylet_kill": "raylet", "gcs_kill": "gcs_server"}  # the fault: the daemon it SIGKILLs
AFTER_READY = ("scancel_run", "teardown_run", "driver_kill", "node_fail", *RAY_KILLS)
COMMAND_BOUND_S = 120  # no slurm-rl command may take longer (a hang is a violation)


def cli(*argv: str) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            [sys.executable, "-m", "slurm_rl", *argv], capture_output=True, text=True, timeout=COMMAND_BOUND_S
        )
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(argv, 124, "", f"hung: over {COMMAND_BOUND_S} s")


def wait_until(cond, bound_s: float, poll_s: float = 0.3) -> bool:  # type: ignore[no-untyped-def]
    end = time.monotonic() + bound_s
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(poll_s)
    return bool(cond())


def hold_s(fault: str) -> str:
    """How long the driver holds after its answer: a fault must find it running."""
    return {"none": "3", "exception": "3", "time_limit": "300"}.get(fault, "40")


def submit_flags(fault: str) -> list[str]:
    return ["--time", "1"] if fault == "time_limit" else []


@dataclass
class NodeFailures:
    """Node failures of the soak, one at a time (the lab has three nodes): (node, when)."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    failed: list[tuple[str, float]] = field(default_factory=list)

    def fail_and_revive(self, node: str, job_id: str, say) -> None:  # type: ignore[no-untyped-def]
        with self.lock:
            self.failed.append((node, time.time()))
            res = subprocess.run([str(LAB), "fail", node], capture_output=True, text=True, timeout=60)
            if res.returncode != 0:
                say(f"slurm-lab fail {node}: {res.stderr.strip()[-200:]}")
                return
            wait_until(lambda: not in_queue(job_id), 180, 1.0)
            res = subprocess.run([str(LAB), "revive", node], capture_output=True, text=True, timeout=120)
            if res.returncode != 0:
                say(f"slurm-lab revive {node}: {res.stderr.strip()[-200:]}")

    def caught(self, job_dir: Path, since: float, until: float) -> str | None:
        """The failed node a job ran on before its end was known (its exit written), if any."""
        try:
            until = min(until, (job_dir / "exit_code").stat().st_mtime)
        except OSError:
            pass
        cluster = _read(job_dir / "cluster.json")
        nodes = set(cluster.get("nodes") or [cluster.get("head_node")]) | _slurm_nodes(job_dir.name)
        return next((n for n, t in self.failed if n in nodes and since <= t <= until), None)


def _slurm_nodes(job_id: str) -> set[str]:
    """The nodes SLURM gave the job (a job caught while coming up has no cluster.json yet)."""
    from slurm_rl.core.nodelist import expand_hostlist

    out = subprocess.run(["sacct", "-X", "-n", "-P", "-o", "NodeList", "-j", job_id], capture_output=True, text=True)
    return {n for line in out.stdout.split() if line and line != "None" for n in expand_hostlist(line)}


def in_queue(job_id: str) -> bool:
    out = subprocess.run(["squeue", "-h", "-j", job_id, "-o", "%T"], capture_output=True, text=True, timeout=30)
    return bool(out.stdout.strip())


def _read(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def inject(fault: str, delay_s: float, job_id: str, job_dir: Path, nodes: NodeFailures, say) -> None:  # type: ignore[no-untyped-def]
    """The fault, at its moment."""
    if fault in ("scancel_bringup", "teardown_bringup"):
        time.sleep(delay_s)
    elif fault in AFTER_READY and not wait_until(lambda: (job_dir / "soak_ready").exists(), 180):
        say("the driver never said it was running")
        return
    cluster = _read(job_dir / "cluster.json")
    head = cluster.get("head_node", "")
    last = (cluster.get("nodes") or [head])[-1]
    if fault.startswith("scancel"):
        subprocess.run(["scancel", job_id], capture_output=True, timeout=30)
    elif fault.startswith("teardown"):
        res = cli("teardown", job_id)
        if res.returncode not in (0, 2) or "Traceback" in res.stderr:
            say(f"teardown exited {res.returncode}: {res.stderr.strip()[-300:]}")
    elif fault == "driver_kill":
        argv = [str(LAB), "exec", head, "--", "pkill", "-KILL", "-f", str(job_dir / "experiment.py")]
        subprocess.run(argv, capture_output=True, timeout=30)
    elif fault in RAY_KILLS:  # the job's own daemon (its temp dir on the command line)
        node = last if fault == "raylet_kill" else head
        argv = [str(LAB), "exec", node, "--", "pkill", "-KILL", "-f", f"{RAY_KILLS[fault]} .*srl-{job_id}"]
        subprocess.run(argv, capture_output=True, timeout=30)
    elif fault == "node_fail":
        nodes.fail_and_revive(last, job_id, say)


def expected(fault: str, n_nodes: int, status: dict, job_dir: Path, caught: str | None) -> list[str]:
    """What the job must say for its fault (``caught``: a node that failed under it)."""
    state, code, reason = status.get("state"), status.get("exit_code"), status.get("exit_reason") or ""
    answer = _read(job_dir / "answer.json")
    if caught:  # the node failure it was aimed at, or a neighbour's
        if state == "COMPLETED" or caught not in reason:
            return [f"caught by {caught}'s failure: {state}, exit {code} ({reason}): the node is not named"]
        return []
    if fault == "none":
        if state != "COMPLETED" or code != 0 or not answer.get("ok") or answer.get("nodes") != n_nodes:
            return [f"untouched job: {state}, exit {code} ({reason}), answer {answer}"]
    elif fault == "exception":
        if state != "FAILED" or code != 1 or "driver exited 1" not in reason:
            return [f"driver exception: {state}, exit {code} ({reason})"]
    elif fault == "driver_kill":
        if state != "FAILED" or "SIGKILL" not in reason:
            return [f"driver SIGKILL: {state}, exit {code} ({reason})"]
    elif fault == "time_limit":
        if state not in ("TIMEOUT", "FAILED") or "time limit" not in reason:
            return [f"time limit: {state}, exit {code} ({reason})"]
    elif fault in RAY_KILLS:
        # named whatever the end: the head's daemons end the job (FAILED); a worker's raylet may
        # die while the driver no longer needs that node (COMPLETED, its answer right)
        named = "Ray died: " in reason and f"'s {RAY_KILLS[fault]} (" in reason
        if not named or state not in ("COMPLETED", "FAILED"):
            return [f"{fault}: {state}, exit {code} ({reason!r}): the dead daemon is not named"]
        if state == "COMPLETED" and (code != 0 or not answer.get("ok")):
            return [f"{fault}: COMPLETED, exit {code}, answer {answer}"]
        if fault == "gcs_kill" and state != "FAILED":
            return [f"gcs_kill: {state}, exit {code} ({reason!r}): a job whose GCS died cannot complete"]
    elif fault == "node_fail":
        return [f"node failure: {state}, exit {code} ({reason}): no failed node found among the job's"]
    elif state == "COMPLETED" or state not in ("CANCELLED", "FAILED"):
        return [f"{fault}: {state}, exit {code} ({reason}): a cancelled job never says COMPLETED"]
    return []
