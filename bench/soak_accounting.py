"""What SLURM's accounting says of a soak job, and whether `slurm-rl status` agrees with it.

`status` reports SLURM's state made to agree with the job dir (slurm_rl/login/reading/summary.py:
``summarize``): a job whose driver was done (exit 0) before SLURM preempted it or lost a node
says COMPLETED, one that lost a node while its driver ran says FAILED and names the node. Any
other difference between `status --json` and `sacct` (state, or exit code) is a violation."""

from __future__ import annotations

import subprocess

from soak_faults import wait_until

FINAL = (
    "COMPLETED",
    "FAILED",
    "CANCELLED",
    "TIMEOUT",
    "PREEMPTED",
    "NODE_FAIL",
    "OUT_OF_MEMORY",
    "BOOT_FAIL",
    "DEADLINE",
)
BOUND_S = 60.0  # slurmdbd records a job's end a moment after it leaves the queue
# our state -> SLURM's states it may stand for (beside its own), and when
ALSO = {"COMPLETED": ("PREEMPTED", "NODE_FAIL"), "FAILED": ("NODE_FAIL",)}


def sacct_end(job_id: str, bound_s: float = BOUND_S) -> tuple[str, str] | None:
    """(state, "code:signal") of the job's allocation once sacct has its end; None if it never
    has within BOUND_S (a violation of its own)."""
    found: list[tuple[str, str]] = []

    def ended() -> bool:
        out = subprocess.run(
            ["sacct", "-X", "-n", "-P", "-o", "State,ExitCode", "-j", job_id],
            capture_output=True,
            text=True,
            timeout=30,
        )
        lines = [line.split("|") for line in out.stdout.splitlines() if "|" in line] if out.returncode == 0 else []
        if lines and lines[0][0].split()[0] in FINAL:
            found.append((lines[0][0].split()[0], lines[0][1]))  # "CANCELLED by 0": CANCELLED
        return bool(found)

    return found[0] if wait_until(ended, bound_s, 1.0) else None


def disagreement(said: dict, accounted: tuple[str, str] | None) -> str:
    """Why `status --json` (SAID) does not agree with SLURM's accounting; "" when it does."""
    if accounted is None:
        return f"sacct has no end of the job within {BOUND_S:.0f} s of its leaving the queue"
    theirs, exit_field = accounted
    ours, code = str(said.get("state")), said.get("exit_code")
    what = f"status says {ours}, exit {code}; sacct says {theirs}, exit {exit_field}"
    if ours != theirs and not (theirs in ALSO.get(ours, ()) and (ours != "COMPLETED" or code == 0)):
        return what
    slurm_code = int(exit_field.split(":")[0] or 0)
    if ours == theirs == "COMPLETED" and (code != 0 or exit_field != "0:0"):
        return what
    if ours == theirs == "FAILED" and code not in (None, slurm_code) and slurm_code != 0:
        return what  # the batch script ends with the driver's code where it has one
    if ours == theirs == "FAILED" and exit_field == "0:0":
        return what
    return ""
