"""Resolve a job's options on the login node: flags > spec > the model's defaults, once.

The model and its checks are ``core/options.py``; this adds what only the login node knows
(the experiment file, the working directory, the submitter's interpreter) and turns a failed
check into one exit-2 line naming the flag.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ..core.errors import UsageError
from ..core.fields import FieldProblem
from ..core.options import JobOptions, flag_of, spec_fields
from ..core.spec import ClusterSpec

__all__ = ["JobOptions", "resolve_options"]


NODE_LOCAL = ("/tmp", "/dev/shm", "/run", "/var/run")  # never shared between nodes


def _usage_error(exc: ValidationError) -> UsageError:
    err = exc.errors()[0]
    problem = (err.get("ctx") or {}).get("error")
    if isinstance(problem, FieldProblem):
        return UsageError(f"{flag_of(problem.field)} {problem.value}: {problem.problem}")
    field = str(err["loc"][0]) if err["loc"] else "?"
    msg = err["msg"].removeprefix("Value error, ")
    value = err.get("input")
    shown = value if isinstance(value, (int, float)) and not isinstance(value, bool) else repr(value)
    return UsageError(f"{flag_of(field)} {shown}: {msg}")


def resolve_options(
    spec: ClusterSpec,
    experiment: str | None,
    *,
    experiment_args: tuple[str, ...] = (),
    user: str,
    **flags: Any,
) -> JobOptions:
    """Validate flags (exit-2 errors name the flag) and merge them with the spec.

    ``flags`` are JobOptions fields; None (a flag not given) falls back to the spec's field of
    the same name where there is one, then to the model's default."""
    unknown = sorted(set(flags) - set(JobOptions.model_fields))
    if unknown:
        raise UsageError(f"unknown job option {unknown[0]!r}; valid: {', '.join(sorted(JobOptions.model_fields))}")
    exp = Path(experiment) if experiment else None  # None: an interactive cluster (no driver)
    if exp is not None and not exp.is_file():
        raise UsageError(
            f"experiment {experiment!r} does not exist or is not a file; pass the path of your driver script"
        )
    values = {k: v for k, v in flags.items() if v is not None}
    for name in spec_fields():
        if name not in values and getattr(spec, name, None) is not None:
            values[name] = getattr(spec, name)
    values.setdefault("python", sys.executable)
    values.setdefault("name", exp.stem if exp else "interactive")
    if values.get("container_image") is not None and spec.container_runtime == "none":
        raise UsageError('--container-image: the spec\'s container_runtime is "none"; set it to pyxis or apptainer')
    workdir = str(Path(values.pop("workdir", None) or os.getcwd()).resolve())
    local = next((p for p in NODE_LOCAL if workdir == p or workdir.startswith(p + "/")), None)
    if spec.cluster_type == "slurm" and local:
        raise UsageError(
            f"--workdir {workdir}: {local} is node-local (each node has its own), so the nodes cannot run the "
            f"driver there; submit from a shared directory (your home, or under the fileroot {spec.fileroot}), "
            f"or pass --workdir DIR"
        )
    try:
        return JobOptions(
            experiment=str(exp.resolve()) if exp else "",
            experiment_args=tuple(experiment_args),
            user=user,
            workdir=workdir,
            **values,
        )
    except ValidationError as exc:
        raise _usage_error(exc) from None
