"""Job ids as slurm-rl spells them: a SLURM job id (``1234``), a task of a sweep (a SLURM job
array task, ``1234_5``: SLURM's own notation, which squeue, scontrol, sacct and scancel take),
or a local run's ``local-...``. The job dir of each is ``<fileroot>/<user>/<name>/<id>``.
"""

from __future__ import annotations

import re
import zlib

from .errors import UsageError

ARRAY_TASK = re.compile(r"^(\d+)_(\d+)$")


def is_array_task(job_id: object) -> bool:
    return isinstance(job_id, str) and ARRAY_TASK.match(job_id) is not None


def array_task_id(array_id: int | str, task: int) -> str:
    return f"{array_id}_{task}"


def is_slurm_job_id(name: str) -> bool:
    """A job dir's name that is a SLURM job or an array task (not a local run)."""
    return name.isdigit() or ARRAY_TASK.match(name) is not None


def as_slurm_id(job_id: str | int) -> int | str:
    """``"1234"`` -> 1234; an array task stays ``"1234_5"``."""
    text = str(job_id)
    return int(text) if text.isdigit() else text


def job_number(job_id: str | int) -> int:
    """A stable number for any job id (ports are spread by it): the id itself when numeric."""
    text = str(job_id)
    if text.isdigit():
        return int(text)
    m = ARRAY_TASK.match(text)
    if m is not None:
        return int(m.group(1)) + 7919 * int(m.group(2))
    return zlib.crc32(text.encode())


JobId = int | str  # a SLURM job id, a sweep's task "1234_5", or a local run's "local-YYYYmmdd-HHMMSS-PID"
LOCAL_PREFIX = "local-"


def parse_job_id(text: str | int) -> JobId:
    """``1234`` -> 1234, ``1234_5`` (a sweep's task) and ``local-...`` -> themselves; anything
    else is a usage error."""
    value = str(text).strip()
    if value.isdigit():
        return int(value)
    if is_array_task(value):
        return value
    if value.startswith(LOCAL_PREFIX) and len(value) > len(LOCAL_PREFIX):
        return value
    raise UsageError(
        f"job {value!r}: not a job id; use the SLURM job id, a sweep task's (1234_5) or a local run's id "
        f"(`slurm-rl list`)"
    )


def is_local(job_id: JobId) -> bool:
    return isinstance(job_id, str) and job_id.startswith(LOCAL_PREFIX)
