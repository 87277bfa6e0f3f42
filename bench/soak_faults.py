"""The soak's faults (bench/soak.py): what each does to a job, at which moment, and what the job
must say after it. FAULTS are the ones a short soak draws from (each ends within a minute);
``--all-faults`` adds the slow and lab-wide ones: the time limit (SLURM's floor is a minute),
a node failed and revived (``slurm-lab fail``/``revive``), a preemption (a higher-tier job that
wants the job's last node whole: SLURM cancels every lower-tier job there) and a held port (the
job's preferred GCS port taken on every node before it starts). A node failure or a preemption
catches every job on that node, not only the one aimed at: a neighbour's end is judged by the
fault it names. ``--oom`` (the cgroup lab) adds an OOM kill inside the job's memory limit."""

from __future__ import annotations

import json
import math
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
LONG_FAULTS = ("time_limit", "node_fail", "preempt", "held_port")
OOM_MIB, OOM_LIMIT = "2000", "1500M"  # the oom fault: a task allocates more than the job's --mem
RAY_KILLS = {"raylet_kill": "raylet", "gcs_kill": "gcs_server"}  # the fault: the daemon it SIGKILLs
AFTER_READY = ("scancel_run", "teardown_run", "driver_kill", "node_fail", "preempt", *RAY_KILLS)
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
    return {"none": "3", "exception": "3", "held_port": "3", "oom": "3", "time_limit": "300"}.get(fault, "40")


def submit_flags(fault: str) -> list[str]:
    return {
        "time_limit": ["--time", "1"],
        "held_port": ["--hold"],  # released once the port is held on every node
        "preempt": ["--partition", "labspot"],
        "oom": ["--mem", OOM_LIMIT],
    }.get(fault, [])


def driver_args(fault: str) -> list[str]:
    return {"exception": ["--raise"], "oom": ["--oom", OOM_MIB]}.get(fault, [])


@dataclass
class NodeFailures:
    """The soak's faults that catch every job on a node, one at a time (the lab has three nodes):
    node failures (node, when) and preemptions (node, when the preempting job started)."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    failed: list[list] = field(default_factory=list)  # [node, failed at, revived at (inf until then)]
    preempted: list[list] = field(default_factory=list)  # [node, preemptor submitted at, ended at (inf till then)]

    def preempt(self, node: str, say) -> None:  # type: ignore[no-untyped-def]
        """A job of the higher tier that wants ``node`` whole, for two seconds."""
        with self.lock:
            argv = ["sbatch", "--parsable", "-p", "laburgent", "--exclusive", "-w", node, "-o", "/dev/null"]
            window = [node, time.time(), math.inf]  # now: a neighbour may end before this returns
            self.preempted.append(window)
            res = subprocess.run([*argv, "--wrap", "sleep 2"], capture_output=True, text=True, timeout=30)
            if res.returncode != 0:
                say(f"the preempting job was refused: {res.stderr.strip()[-200:]}")
                return
            urgent = res.stdout.strip().split(";")[0]
            if not wait_until(lambda: not in_queue(urgent), 120, 0.5):
                say(f"the preempting job {urgent} never ran")
            window[2] = time.time()  # while it pended, SLURM could start a job on the node and preempt it

    def fail_and_revive(self, node: str, job_id: str, say) -> None:  # type: ignore[no-untyped-def]
        with self.lock:
            window = [node, time.time(), math.inf]
            self.failed.append(window)
            res = subprocess.run([str(LAB), "fail", node], capture_output=True, text=True, timeout=60)
            if res.returncode != 0:
                say(f"slurm-lab fail {node}: {res.stderr.strip()[-200:]}")
                return
            wait_until(lambda: not in_queue(job_id), 180, 1.0)
            res = subprocess.run([str(LAB), "revive", node], capture_output=True, text=True, timeout=120)
            window[2] = time.time()
            if res.returncode != 0:
                say(f"slurm-lab revive {node}: {res.stderr.strip()[-200:]}")

    def caught(self, job_dir: Path, since: float, until: float) -> tuple[str, str] | None:
        """(node, "failure" or "preemption"): what caught a job on one of its nodes before its
        end was known (its exit written), if anything did."""
        try:
            until = min(until, (job_dir / "exit_code").stat().st_mtime)
        except OSError:
            pass
        cluster = _read(job_dir / "cluster.json")
        began, given = _slurm_job(job_dir.name)
        nodes = set(cluster.get("nodes") or [cluster.get("head_node")]) | given
        # on the node while it was down: SLURM goes on giving a failed node to jobs until it
        # notices (SlurmdTimeout), so a job started after the failure can be caught too
        began = began or until
        failed = next(
            (n for n, t, up in self.failed if n in nodes and max(since, began) <= up + 1 and t <= until), None
        )
        if failed:
            return failed, "failure"
        # (a preempted job's end comes before the preempting job starts: judged by its submission)
        hit = [n for n, t, done in self.preempted if n in nodes and began <= done + 1 and t <= until + 1]
        preempted = hit[0] if hit else None
        return (preempted, "preemption") if preempted else None


def _slurm_job(job_id: str) -> tuple[float | None, set[str]]:
    """When SLURM started the job (its allocation; None before it starts) and the nodes it gave
    it (a job caught while coming up has no cluster.json yet): one sacct call."""
    from slurm_rl.core.nodelist import expand_hostlist

    out = subprocess.run(
        ["sacct", "-X", "-n", "-P", "-o", "Start,NodeList", "-j", job_id], capture_output=True, text=True, timeout=30
    )
    began: float | None = None
    nodes: set[str] = set()
    for line in out.stdout.splitlines():  # a heterogeneous job: a line per component, in no set order
        start, _, listed = line.partition("|")
        listed = listed.strip()
        nodes |= set(expand_hostlist(listed)) if listed and listed != "None" else set()
        try:
            t = time.mktime(time.strptime(start, "%Y-%m-%dT%H:%M:%S"))
        except ValueError:  # "Unknown": not started
            continue
        began = t if began is None else min(began, t)
    return began, nodes


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
    elif fault == "preempt":
        nodes.preempt(last, say)
    elif fault == "held_port":
        hold_the_port(job_id, say)


def hold_the_port(job_id: str, say) -> None:  # type: ignore[no-untyped-def]
    """The held job's preferred GCS port taken on every node (another program's), the job
    released, the holders kept until it ends: it must start on other ports and finish."""
    from slurm_rl.core.ports import preferred_gcs_port

    port = preferred_gcs_port(int(job_id))
    hold = (
        f"import socket,time; s=socket.socket(); s.bind(('', {port})); s.listen(); "
        "print(1, flush=True); time.sleep(600)"
    )
    holders = [
        subprocess.Popen([str(LAB), "exec", f"node{k}", "--", "python3", "-c", hold], stdout=subprocess.PIPE, text=True)
        for k in range(1, 4)
    ]
    try:
        # each says once it holds it; a node failed by another fault meanwhile holds nothing (and runs no job)
        bound = [h.stdout.readline().strip() == "1" for h in holders if h.stdout]
        if not any(bound):
            say(f"port {port} could not be held on any node (another soak job's?)")
        subprocess.run(["scontrol", "release", job_id], capture_output=True, timeout=30)
        wait_until(lambda: not in_queue(job_id), 300, 1.0)
    finally:
        for h in holders:
            h.kill()
            h.wait(timeout=30)


def expected(
    fault: str, n_nodes: int, status: dict, job_dir: Path, caught: tuple[str, str] | None, heal: bool = False
) -> list[str]:
    """What the job must say for its fault (``caught``: a node failure or a preemption under it;
    ``heal``: a job with --heal 1, which must outlive the loss of a worker node)."""
    state, code, reason = status.get("state"), status.get("exit_code"), status.get("exit_reason") or ""
    answer = _read(job_dir / "answer.json")
    head = _read(job_dir / "cluster.json").get("head_node")
    lost_worker = (caught and caught[1] == "failure" and caught[0] != head) or (not caught and fault == "raylet_kill")
    if heal and lost_worker and answer:  # it ran (a node failing as the job starts fails it): healed, it completes
        if state != "COMPLETED" or code != 0 or not answer.get("ok"):
            return [f"healing job, a worker node lost ({fault}): {state}, exit {code} ({reason}), answer {answer}"]
        return []
    if caught and caught[1] == "failure":  # the node failure it was aimed at, or a neighbour's
        if state == "CANCELLED" and fault.startswith(("scancel", "teardown")):  # its own cancel came too
            return []
        if state == "COMPLETED" and code == 0 and answer.get("ok"):  # done before the loss could end it
            return []  # (Ray declares a node lost ~10 s after it died; SLURM's NODE_FAIL then comes too late)
        if state == "COMPLETED" or caught[0] not in reason:
            return [f"caught by {caught[0]}'s failure: {state}, exit {code} ({reason}): the node is not named"]
        return []
    if caught:  # preempted (a neighbour's preemption may also miss it: then it completes right)
        if state == "COMPLETED" and answer.get("ok"):
            return []
        if state == "COMPLETED" or "preempt" not in f"{state} {reason}".lower():
            return [f"caught by a preemption on {caught[0]}: {state}, exit {code} ({reason}): not named"]
        return []
    if fault in ("none", "held_port"):
        if state != "COMPLETED" or code != 0 or not answer.get("ok") or answer.get("nodes") != n_nodes:
            what = "untouched" if fault == "none" else "held-port"
            return [f"{what} job: {state}, exit {code} ({reason}), answer {answer}"]
        if fault == "held_port":
            from slurm_rl.core.ports import preferred_gcs_port

            gcs = _read(job_dir / "cluster.json").get("ports", {}).get("gcs")
            if gcs == preferred_gcs_port(int(job_dir.name)):
                return [f"held port: the job says it runs its GCS on {gcs}, a port another program held"]
    elif fault == "oom":
        if state == "COMPLETED" or "OOM: " not in reason:
            return [f"OOM: {state}, exit {code} ({reason}): the OOM kill is not named"]
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
    elif fault == "preempt":
        return [f"preemption: {state}, exit {code} ({reason}): the preempted node is not among the job's"]
    elif state == "COMPLETED" or state not in ("CANCELLED", "FAILED"):
        return [f"{fault}: {state}, exit {code} ({reason}): a cancelled job never says COMPLETED"]
    return []
