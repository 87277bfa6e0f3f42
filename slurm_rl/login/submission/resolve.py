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

from ...config.site_defaults import site_default_names
from ...config.spec import ClusterSpec
from ...core.errors import UsageError
from ...core.fields import FieldProblem
from ...core.options import JobOptions
from ...core.parts import load_parts, ray_node_count, with_job_defaults
from ...runtimes import RUNTIMES, runtime_of
from .flags import flag_of
from .plan import container_mounts

__all__ = ["JobOptions", "resolve_options"]


ADDITIVE = ("sbatch_args", "srun_args")


def check_before_the_queue(exp: Path | None) -> None:
    """What would fail on the nodes after the queue wait and can be known here: a driver that
    does not compile. (Whether a path exists on the nodes cannot be known here: a site, or the
    lab, may share parts of /tmp; the node bootstrap names a missing working directory.)"""
    if exp is not None:
        try:
            compile(exp.read_bytes(), str(exp), "exec")
        except SyntaxError as exc:
            raise UsageError(
                f"experiment {exp}: line {exc.lineno}: {exc.msg}; it would fail on the nodes after the queue wait"
            ) from None
        except ValueError as exc:  # null bytes: not a Python file
            raise UsageError(f"experiment {exp}: not a Python script ({exc})") from None


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


def changed(opts: JobOptions, **changes: Any) -> JobOptions:
    """``opts`` with ``changes``, checked; a problem is a UsageError naming the flag."""
    try:
        return opts.replace(**changes)
    except ValidationError as exc:
        raise _usage_error(exc) from None


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
    values = {k: v for k, v in flags.items() if v is not None and v != ()}
    parts = _parts(values)
    for name in site_default_names():
        site = getattr(spec, name, None)
        if name in ADDITIVE:  # the spec's escape-hatch arguments, then the command line's
            values[name] = (*(site or ()), *values.get(name, ()))
        elif name not in values and site is not None:
            values[name] = site
    values.setdefault("python", sys.executable)
    values.setdefault("name", exp.stem if exp else "interactive")
    check_before_the_queue(exp)
    if values.get("container_image") is not None and not runtime_of(spec.container_runtime).contained:
        raise UsageError(
            f"--container-image: the spec's container_runtime is {spec.container_runtime!r} (no container); "
            f"set it to one of {', '.join(n for n, r in RUNTIMES.items() if r.contained)}"
        )
    workdir = container_workdir(spec, values.pop("workdir", None))
    if parts:
        for name in NOT_FOR_PARTS:
            if name not in flags or flags[name] is None:
                values.pop(name, None)
        parts = with_job_defaults(parts, values.get("partition"), values.get("cpus_per_node"), values.get("mem"))
        values.update(parts=parts, nodes=ray_node_count(parts))
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


# what a parts file says per part: refused beside --parts
PER_PART = {
    "nodes": "the parts file gives each part its nodes",
    "partition": "the parts file gives each part its partition (the spec's is the default)",
    "gpus_per_node": "the parts file gives each part its GPUs per node",
    "head_partition": "the Ray head runs on the first Ray part's first node",
}
# site defaults a job of parts does not take from the spec (they shape one homogeneous cluster)
NOT_FOR_PARTS = ("head_partition", "heal", "segment")


def _parts(values: dict[str, Any]) -> dict:
    """--parts' file, read and checked; the flags it replaces refused beside it."""
    path = values.get("parts_file")
    if not path:
        return {}
    for name, why in PER_PART.items():
        if name in values:
            raise UsageError(f"{flag_of(name)} with --parts {path}: {why}; drop {flag_of(name)}")
    return load_parts(path)


def container_workdir(spec: ClusterSpec, asked: str | None) -> str:
    """The driver's working directory. Bare nodes: --workdir, else where you submit from. In a
    container: "" (the job dir, on the always-mounted fileroot) unless --workdir names a
    directory one of the container's mounts provides; anything else is refused here, before
    the queue (the runtime would fail every node's step: it cannot chdir there)."""
    if not runtime_of(spec.container_runtime).contained:
        return str(Path(asked or os.getcwd()).resolve())
    if not asked:
        return ""
    workdir = os.path.normpath(os.path.abspath(asked))
    targets = [m.split(":")[1] for m in container_mounts(spec)]
    if not any(workdir == t or workdir.startswith(t.rstrip("/") + "/") for t in targets):
        raise UsageError(
            f"--workdir {workdir}: not inside the {spec.container_runtime} container, which mounts only "
            f"{', '.join(targets)}; choose a directory under one of them (or add a mount to the spec's "
            f"default_mount), or leave --workdir out to run in the job dir"
        )
    return workdir
