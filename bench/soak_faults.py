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

from _lab import LAB, as_user

FAULTS = (
    "exception", "driver_kill", "scancel_bringup", "scancel_run", "teardown_bringup", "teardown_run",
    "raylet_kill", "gcs_kill",
)  # fmt: skip
LONG_FAULTS = ("time_limit", "node_fail", "preempt", "held_port")
OOM_MIB, OOM_LIMIT = "2000", "1500M"  # the oom fault: a task allocates more than the job's --mem
RAY_KILLS = {"raylet_kill": "raylet", "gcs_kill": "gcs_server"}  # the fault: the daemon it SIGKILLs
AFTER_READY = ("scancel_run", "teardown_run", "driver_kill", "node_fail", "preempt", *RAY_KILLS)
COMMAND_BOUND_S = 120  # no slurm-rl command may take longer (a hang is a violation)
DOWN_NOW: set[str] = set()  # nodes failed by the soak and not yet revived: nothing on them to look at


RUN_AS: dict[str, str | None] = {"user": None}  # whom the soak's slurm-rl commands run as (soak --user)


def cli(*argv: str) -> subprocess.CompletedProcess[str]:
    """`slurm-rl ARGV` as the soak's user, bounded."""
    try:
        return subprocess.run(
            as_user(RUN_AS["user"], [sys.executable, "-m", "slurm_rl", *argv]),
            capture_output=True,
            text=True,
            timeout=COMMAND_BOUND_S,
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

    def preempt(self, node: str, say) -> bool:  # type: ignore[no-untyped-def]
        """A job of the higher tier that wants ``node`` whole, for two seconds."""
        with self.lock:
            argv = ["sbatch", "--parsable", "-p", "laburgent", "--exclusive", "-w", node, "-o", "/dev/null"]
            window = [node, time.time(), math.inf]  # now: a neighbour may end before this returns
            self.preempted.append(window)
            res = subprocess.run([*argv, "--wrap", "sleep 2"], capture_output=True, text=True, timeout=30)
            if res.returncode != 0:
                say(f"the preempting job was refused: {res.stderr.strip()[-200:]}")
                return False
            urgent = res.stdout.strip().split(";")[0]
            ran = wait_until(lambda: not in_queue(urgent), 120, 0.5)
            if not ran:
                say(f"the preempting job {urgent} never ran")
            window[2] = time.time()  # while it pended, SLURM could start a job on the node and preempt it
            return ran

    def fail_and_revive(self, node: str, job_id: str, say) -> bool:  # type: ignore[no-untyped-def]
        with self.lock:
            window = [node, time.time(), math.inf]
            self.failed.append(window)
            DOWN_NOW.add(node)
            res = subprocess.run([str(LAB), "fail", node], capture_output=True, text=True, timeout=60)
            if res.returncode != 0:
                DOWN_NOW.discard(node)
                say(f"slurm-lab fail {node}: {res.stderr.strip()[-200:]}")
                return False
            wait_until(lambda: not in_queue(job_id), 180, 1.0)
            res = subprocess.run([str(LAB), "revive", node], capture_output=True, text=True, timeout=120)
            window[2] = time.time()
            DOWN_NOW.discard(node)
            if res.returncode != 0:
                say(f"slurm-lab revive {node}: {res.stderr.strip()[-200:]}")
            return True  # it failed under the job, revived or not

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


def inject(fault: str, delay_s: float, job_id: str, job_dir: Path, nodes: NodeFailures, say) -> bool | None:  # type: ignore[no-untyped-def]
    """The fault, at its moment: whether it landed (its command did what it should to the job),
    or None where only the job's end can tell (a driver's own exception, the time limit, OOM).
    A fault that could not land says why (``say``)."""
    if fault in ("scancel_bringup", "teardown_bringup"):
        time.sleep(delay_s)
    elif fault in AFTER_READY and not wait_until(lambda: (job_dir / "soak_ready").exists(), 180):
        say("the driver never said it was running")
        return False
    cluster = _read(job_dir / "cluster.json")
    head = cluster.get("head_node", "")
    last = (cluster.get("nodes") or [head])[-1]
    if fault.startswith("scancel"):
        queued = in_queue(job_id)
        res = subprocess.run(["scancel", job_id], capture_output=True, text=True, timeout=30)
        if res.returncode != 0 or not queued:
            say(f"scancel did not land (exit {res.returncode}, in the queue: {queued}): {res.stderr.strip()[-200:]}")
            return False
        return True
    if fault.startswith("teardown"):
        res = cli("teardown", job_id)
        if res.returncode not in (0, 2) or "Traceback" in res.stderr:
            say(f"teardown exited {res.returncode}: {res.stderr.strip()[-300:]}")
        elif res.returncode == 2:
            say(f"teardown did not land (exit 2: {res.stderr.strip()[-200:]})")
        return res.returncode == 0
    if fault == "driver_kill":
        return _pkill(head, str(job_dir / "experiment.py"), "the driver", say)
    if fault in RAY_KILLS:  # the job's own daemon (its temp dir on the command line)
        node = last if fault == "raylet_kill" else head
        return _pkill(node, f"{RAY_KILLS[fault]} .*srl-{job_id}", f"{RAY_KILLS[fault]} of the job", say)
    if fault == "node_fail":
        return nodes.fail_and_revive(last, job_id, say)
    if fault == "preempt":
        return nodes.preempt(last, say)
    if fault == "held_port":
        return hold_the_port(job_id, say)
    return None


def _pkill(node: str, pattern: str, what: str, say) -> bool:  # type: ignore[no-untyped-def]
    """SIGKILL what matches PATTERN on NODE; landed if pkill found it (exit 0; 1: none matched)."""
    argv = [str(LAB), "exec", node, "--", "pkill", "-KILL", "-f", pattern]
    res = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    if res.returncode != 0:
        say(f"{what} on {node} was not killed: pkill exited {res.returncode} {res.stderr.strip()[-200:]}")
    return res.returncode == 0


def landed_by_end(fault: str, status: dict) -> bool:
    """Whether a fault only the job's end can tell of landed: the driver raised, SLURM's time
    limit or an OOM kill ended the job (as `status` names it)."""
    reason = str(status.get("exit_reason") or "")
    return {
        "exception": "driver exited 1" in reason,
        "time_limit": "time limit" in reason,
        "oom": "OOM: " in reason,
    }.get(fault, False)


def hold_the_port(job_id: str, say) -> bool:  # type: ignore[no-untyped-def]
    """The held job's preferred GCS port taken on every node (another program's), the job
    released, the holders kept until it ends: it must start on other ports and finish."""
    from slurm_rl.core.ports import preferred_gcs_port

    port = preferred_gcs_port(int(job_id))
    hold = (  # until its stdin closes: killing `slurm-lab exec` alone left the holder on the node
        f"import socket,sys; s=socket.socket(); s.bind(('', {port})); s.listen(); "
        "print(1, flush=True); sys.stdin.read()"
    )
    pipes = {"stdin": subprocess.PIPE, "stdout": subprocess.PIPE, "text": True}
    holders = [
        subprocess.Popen([str(LAB), "exec", f"node{k}", "--", sys.executable, "-I", "-c", hold], **pipes)
        for k in range(1, 4)
    ]
    try:
        # each says once it holds it; a node failed by another fault meanwhile holds nothing (and runs no job)
        bound = [h.stdout.readline().strip() == "1" for h in holders if h.stdout]
        if not any(bound):
            say(f"port {port} could not be held on any node (another soak job's?)")
        subprocess.run(["scontrol", "release", job_id], capture_output=True, timeout=30)
        wait_until(lambda: not in_queue(job_id), 300, 1.0)
        return any(bound)
    finally:
        for h in holders:
            h.stdin.close()  # type: ignore[union-attr]
            try:
                h.wait(timeout=30)
            except subprocess.TimeoutExpired:
                h.kill()
                h.wait(timeout=30)
