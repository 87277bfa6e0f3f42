"""The single-field rules of the job options: ranges, the warning signal, the job name, and the
sbatch/srun options slurm-rl owns (an escape-hatch argument may not change them). Each is a
pydantic type, so the options model states a field's rule where it declares the field."""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import Field

from .fields import rule, time_minutes
from .ports import BLOCK_SIZE
from .retries import retry_on_problem

DEFAULT_SIGNAL = "B:USR2@120"
_SIGNAL = re.compile(r"^(B:|R:|RB:)?((?:SIG)?[A-Z0-9]+)@(\d+)$")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
# sbatch options that would break the job as slurm-rl runs it: an escape-hatch argument is
# refused as unsafe, with why.
SBATCH_UNSAFE = {
    **dict.fromkeys(("--ntasks-per-node", "--ntasks", "-n", "--ntasks-per-core"), "slurm-rl runs one task per node"),
    **dict.fromkeys(("--output", "-o", "--error", "-e", "--open-mode"), "logs go to the job dir's logs/"),
    **dict.fromkeys(("--array", "-a", "--wrap", "--parsable", "--het-job"), "a slurm-rl job is one batch script"),
    **dict.fromkeys(("--nodes", "-N"), "the manifest counts the nodes that must join; use --nodes"),
}
# sbatch options the options model has a flag for: refused, naming that flag (it is checked
# before the queue, reaches the manifest and the job's later steps, e.g. a cleanup's account).
SBATCH_HAS_FLAG = {
    **dict.fromkeys(("--job-name", "-J"), "--name"),
    **dict.fromkeys(("--chdir", "-D"), "--workdir"),
    **dict.fromkeys(("--requeue", "--no-requeue"), "--requeue N"),
    **dict.fromkeys(("--hold", "-H"), "submit --hold"),
    **dict.fromkeys(("--no-kill", "-k"), "--heal K"),
    **dict.fromkeys(("--qos", "-q"), "--qos"),
    **dict.fromkeys(("--constraint", "-C"), "--constraint"),
    **dict.fromkeys(("--exclude", "-x"), "--exclude"),
    **dict.fromkeys(("--nodelist", "-w"), "--nodelist"),
    **dict.fromkeys(("--dependency", "-d"), "--dependency"),
    **dict.fromkeys(("--partition", "-p"), "--partition"),
    **dict.fromkeys(("--account", "-A"), "--account"),
    **dict.fromkeys(("--time", "-t"), "--time"),
    **dict.fromkeys(("--cpus-per-task", "-c"), "--cpus-per-node"),
    **{
        f: f
        for f in (
            "--signal",
            "--exclusive",
            "--mem",
            "--mem-per-cpu",
            "--gres",
            "--reservation",
            "--mail-type",
            "--mail-user",
            "--comment",
            "--gpus-per-node",
            "--segment",
        )
    },
}
SRUN_OWNED = {
    **dict.fromkeys(
        ("--ntasks-per-node", "--ntasks", "-n", "--nodes", "-N", "--het-group"),
        "the node step runs one task on every node of the job",
    ),
    **dict.fromkeys(
        ("--kill-on-bad-exit", "-K", "--no-kill", "-k", "--overlap", "--jobid"), "slurm-rl's teardown depends on it"
    ),
    **dict.fromkeys(("--output", "-o", "--error", "-e"), "node logs go to the job dir's logs/"),
}


def _signal_problem(v: str) -> str | None:
    m = _SIGNAL.match(v)
    if not m:
        return "use [B:]SIG@SECONDS, e.g. B:USR2@120"
    if m.group(2) in ("USR1", "SIGUSR1", "10"):
        return "USR1 is taken by NCCL's own handler; use USR2, e.g. B:USR2@120"
    return None


_DURATION = re.compile(r"^(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s?)?$")
MIN_STALL_S = 20


def duration_seconds(text: str) -> float:
    """ "90" or "90s" -> 90, "30m" -> 1800, "1h30m" -> 5400; ValueError for anything else."""
    m = _DURATION.match(text.strip())
    if not m or not any(m.groups()):
        raise ValueError(text)
    h, mi, s = (int(g or 0) for g in m.groups())
    return float(h * 3600 + mi * 60 + s)


def _stall_problem(v: str) -> str | None:
    try:
        seconds = duration_seconds(v)
    except ValueError:
        return "use a duration such as 30m, 90s or 1h"
    return f"must be at least {MIN_STALL_S} s (e.g. 30m)" if seconds < MIN_STALL_S else None


def _escape_hatch(unsafe: dict[str, str], has_flag: dict[str, str] | None = None) -> Any:
    def problem(args: tuple[str, ...] | list[str]) -> str | None:
        for arg in args:
            if "\n" in arg or not arg.startswith("-"):
                return f"{arg!r} is not one option (it must start with '-', on one line)"
            name, _, value = arg.partition("=")
            if name in unsafe:
                return f"{arg!r} would break the job as slurm-rl runs it: {unsafe[name]}"
            if has_flag and name in has_flag:
                shown = f"{has_flag[name]} {value}" if value and " " not in has_flag[name] else has_flag[name]
                return f"{arg!r}: slurm-rl has a flag for this; use {shown} instead"
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
StallTimeout = Annotated[str, rule(_stall_problem)]
RetryOnCauses = Annotated[str, rule(retry_on_problem)]
SbatchArgs = Annotated[tuple[str, ...], _escape_hatch(SBATCH_UNSAFE, SBATCH_HAS_FLAG)]
SrunArgs = Annotated[tuple[str, ...], _escape_hatch(SRUN_OWNED)]
SbatchArgList = Annotated[list[str], _escape_hatch(SBATCH_UNSAFE, SBATCH_HAS_FLAG)]  # the spec's (a JSON list)
SrunArgList = Annotated[list[str], _escape_hatch(SRUN_OWNED)]


def signal_seconds(signal: str) -> int:
    """Seconds before the limit at which ``--signal`` warns (``B:USR2@120`` -> 120)."""
    return int(signal.rpartition("@")[2])


def warning_for(time_limit: str) -> int:
    """The default warning for a time limit: 120 s, or half the limit when that is shorter."""
    return int(min(signal_seconds(DEFAULT_SIGNAL), time_minutes(time_limit) * 30))


def option(
    default: Any, *flags: str, help: str, metavar: str | None = None, spec: bool = False, directive: str | None = None
) -> Any:
    """A field that is also a command-line flag (``flags``: click's spellings, long one last);
    ``directive``: it is the ``#SBATCH`` option of its long flag's name, of the job ("job") or of
    its nodes ("nodes"), written as its value (login/submission/directives.py)."""
    meta = {"flags": list(flags), "help": help, "metavar": metavar, "spec": spec, "directive": directive}
    return Field(default, json_schema_extra=meta)  # type: ignore[arg-type]  # JSON values, all of them


def spec_default(default: Any, spec_unset: Any) -> Any:
    """A field without a flag whose default comes from the spec's field of the same name, which
    reads ``spec_unset`` where a spec does not set it (the spec's own meaning of unset)."""
    return Field(default, json_schema_extra={"spec": True, "spec_unset": spec_unset})
