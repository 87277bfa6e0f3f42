"""What a soak job must say after its fault (bench/soak.py): its state, exit code and reason as
`slurm-rl status --json` gives them, judged by the fault aimed at it, or by a node failure or a
preemption that caught it first (a neighbour's, on one of its nodes)."""

from __future__ import annotations

import json
from pathlib import Path

from soak_faults import RAY_KILLS


def _read(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


# the causes (core/causes.py) `status --json` may give a job for the fault aimed at it, beside
# "completed" where the job may finish first (a fault that came too late to matter)
CAUSES = {
    "none": {"completed"},
    "held_port": {"completed"},
    "oom": {"oom"},
    "exception": {"driver_error"},
    "driver_kill": {"driver_killed"},
    "time_limit": {"time_limit"},
    "raylet_kill": {"ray_died", "completed"},
    "gcs_kill": {"ray_died"},
}
CANCELLED = {"cancelled"}  # scancel and teardown, before or after the job was ready


def expected(
    fault: str, n_nodes: int, status: dict, job_dir: Path, caught: tuple[str, str] | None, heal: bool = False
) -> list[str]:
    """What the job must say for its fault (``caught``: a node failure or a preemption under it;
    ``heal``: a job with --heal 1, which must outlive the loss of a worker node): its state,
    exit code and reason, then its cause."""
    said = _said(fault, n_nodes, status, job_dir, caught, heal)
    return said or _cause(fault, status, caught, heal)


def _cause(fault: str, status: dict, caught: tuple[str, str] | None, heal: bool) -> list[str]:
    """The cause agrees with the fault: the one decision (core/ending.py) behind every state shown."""
    cause = status.get("cause") or {}
    kind, node = cause.get("kind"), cause.get("node")
    if status.get("state") == "COMPLETED" or (heal and kind == "completed"):
        ok = kind == "completed"
    elif caught and caught[1] == "failure":
        ok = (kind in ("node_lost", "launch_failure") and node == caught[0]) or kind == "cancelled"
    elif caught:
        ok = kind == "preempted"
    else:
        ok = kind in CAUSES.get(fault, CANCELLED)
    return [] if ok else [f"{fault}: {status.get('state')} with cause {cause or None}: not the fault's"]


def _said(
    fault: str, n_nodes: int, status: dict, job_dir: Path, caught: tuple[str, str] | None, heal: bool
) -> list[str]:
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
        if state == "COMPLETED" or "preempted by SLURM" not in reason:  # the cause in words, not only the state
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
