"""The single-field rules of the job options: ranges, the warning signal, the job name, and the
sbatch/srun options slurm-rl owns (an escape-hatch argument may not change them). Each is a
pydantic type, so the options model states a field's rule where it declares the field."""

from __future__ import annotations

import re
from typing import Annotated, Any

from .fields import rule, time_minutes
from .ports import BLOCK_SIZE

DEFAULT_SIGNAL = "B:USR2@120"
_SIGNAL = re.compile(r"^(B:|R:|RB:)?((?:SIG)?[A-Z0-9]+)@(\d+)$")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_USE = "use slurm-rl's {} instead"
# sbatch/srun options slurm-rl sets itself: an escape-hatch argument may not change them.
SBATCH_OWNED = {
    **dict.fromkeys(("--ntasks-per-node", "--ntasks", "-n", "--ntasks-per-core"), "slurm-rl runs one task per node"),
    **dict.fromkeys(("--output", "-o", "--error", "-e", "--open-mode"), "logs go to the job dir's logs/"),
    **dict.fromkeys(("--nodes", "-N"), _USE.format("--nodes")),
    **dict.fromkeys(("--job-name", "-J"), _USE.format("--name")),
    **dict.fromkeys(("--chdir", "-D"), _USE.format("--workdir")),
    **dict.fromkeys(("--signal",), _USE.format("--signal")),
    **dict.fromkeys(("--requeue", "--no-requeue"), _USE.format("--requeue N")),
    **dict.fromkeys(("--hold", "-H"), _USE.format("submit --hold")),
    **dict.fromkeys(("--array", "-a", "--wrap", "--parsable", "--het-job"), "a slurm-rl job is one batch script"),
    **dict.fromkeys(
        (
            "--qos",
            "-q",
            "--constraint",
            "-C",
            "--exclusive",
            "--mem",
            "--mem-per-cpu",
            "--gres",
            "--reservation",
            "--exclude",
            "-x",
            "--nodelist",
            "-w",
            "--dependency",
            "-d",
            "--mail-type",
            "--mail-user",
            "--comment",
            "--partition",
            "-p",
            "--account",
            "-A",
            "--time",
            "-t",
            "--cpus-per-task",
            "-c",
            "--gpus-per-node",
        ),
        "it has a flag of its own: use that",
    ),
}
SRUN_OWNED = {
    **dict.fromkeys(
        ("--ntasks-per-node", "--ntasks", "-n", "--nodes", "-N", "--het-group"),
        "the node step runs one task on every node of the job",
    ),
    **dict.fromkeys(("--kill-on-bad-exit", "-K", "--overlap", "--jobid"), "slurm-rl's teardown depends on it"),
    **dict.fromkeys(("--output", "-o", "--error", "-e"), "node logs go to the job dir's logs/"),
}


def _signal_problem(v: str) -> str | None:
    m = _SIGNAL.match(v)
    if not m:
        return "use [B:]SIG@SECONDS, e.g. B:USR2@120"
    if m.group(2) in ("USR1", "SIGUSR1", "10"):
        return "USR1 is taken by NCCL's own handler; use USR2, e.g. B:USR2@120"
    return None


def _escape_hatch(owned: dict[str, str]) -> Any:
    def problem(args: tuple[str, ...] | list[str]) -> str | None:
        for arg in args:
            if "\n" in arg or not arg.startswith("-"):
                return f"{arg!r} is not one option (it must start with '-', on one line)"
            if arg.split("=", 1)[0] in owned:
                return f"{arg!r} would break slurm-rl's own contract; {owned[arg.split('=', 1)[0]]}"
        return None

    return rule(problem)


AtLeast0 = Annotated[int, rule(lambda v: "must be >= 0" if v < 0 else None)]
AtLeast1 = Annotated[int, rule(lambda v: "must be >= 1" if v < 1 else None)]
Requeues = Annotated[int, rule(lambda v: "must be >= 0 (the number of automatic requeues)" if v < 0 else None)]
Seconds = Annotated[float, rule(lambda v: "must be > 0 seconds" if v <= 0 else None)]
PortBase = Annotated[
    int,
    rule(
        lambda v: (
            None
            if 1024 <= v <= 65535 - BLOCK_SIZE
            else f"must be 1024..{65535 - BLOCK_SIZE}; it pins {BLOCK_SIZE} ports from there "
            f"(or leave it out: slurm-rl picks free ports on each node)"
        )
    ),
]
JobName = Annotated[
    str, rule(lambda v: "use up to 64 letters, digits, '.', '_' or '-'" if v and not _NAME.match(v) else None)
]
WarningSignal = Annotated[str, rule(_signal_problem)]
SbatchArgs = Annotated[tuple[str, ...], _escape_hatch(SBATCH_OWNED)]
SrunArgs = Annotated[tuple[str, ...], _escape_hatch(SRUN_OWNED)]
SbatchArgList = Annotated[list[str], _escape_hatch(SBATCH_OWNED)]  # the spec's (a JSON list)
SrunArgList = Annotated[list[str], _escape_hatch(SRUN_OWNED)]


def signal_seconds(signal: str) -> int:
    """Seconds before the limit at which ``--signal`` warns (``B:USR2@120`` -> 120)."""
    return int(signal.rpartition("@")[2])


def warning_for(time_limit: str) -> int:
    """The default warning for a time limit: 120 s, or half the limit when that is shorter."""
    return int(min(signal_seconds(DEFAULT_SIGNAL), time_minutes(time_limit) * 30))
