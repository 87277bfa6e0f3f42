"""The Python submit API, for submitit users: ``job = slurm_rl.submit(spec, fn, *args, nodes=3)``
runs ``fn(*args, **kwargs)`` as the driver of a slurm-rl job (one Ray cluster over ``nodes``
nodes, torn down after) and ``job.result()`` returns what it returned, or raises
``submitit``'s ``FailedJobError`` with the remote traceback or the job's exit reason.
``slurm_rl.map_array(spec, fn, xs, ys, nodes=2)`` runs ``fn(x, y)`` for each pair as one task
of a sweep (a SLURM job array), each task its own Ray cluster, and returns one Job per task.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..config.spec import ClusterSpec, load_spec
from ..core.errors import UsageError
from ..core.paths import JobPaths, current_user
from ..slurm import SlurmClient
from .submission.resolve import resolve_options

CALL_DRIVER = Path(__file__).resolve().parent.parent / "driver" / "call.py"


def api_client() -> SlurmClient:
    """The Python API's SLURM client, where the caller gave none (the commands': login/commands/job_command.py)."""
    return SlurmClient()


def default_name(fn: Callable[..., Any]) -> str:
    """The job name of a call: the function's name as a job name may spell it (``<lambda>``,
    ``_helper``: ``lambda``, ``helper``), else ``call``."""
    name = re.sub(r"[^\w.-]", "", getattr(fn, "__name__", "")).lstrip("._-")[:64]
    return name or "call"


class Job:
    """A submitted function call: its SLURM job id, its job dir, and its result when done."""

    def __init__(self, job_id: int | str, paths: JobPaths, client: SlurmClient) -> None:
        self.job_id = job_id
        self.paths = paths
        self._client = client
        self._ended = False  # result() returned or raised: the job has ended, whatever squeue says yet

    def __repr__(self) -> str:
        return f"Job(job_id={self.job_id}, job_dir={str(self.paths.job_dir)!r})"

    @property
    def state(self) -> str:
        return self._client.job_state(self.job_id).state

    def done(self) -> bool:
        """True once the job has ended: at once after ``result()`` returned or raised (SLURM
        may still list the job as completing for a moment), else as SLURM says."""
        if self._ended:
            return True
        state = self._client.job_state(self.job_id)
        return state.finished or state.state == "UNKNOWN"

    def cancel(self) -> None:
        self._client.scancel(self.job_id)

    def result(self) -> Any:
        """Wait for the job to end; return the function's value or raise FailedJobError."""
        import cloudpickle
        from submitit.core.utils import FailedJobError  # the error submitit users already catch

        from .reading.job_wait import wait_for_job

        summary = wait_for_job(self.paths, self.job_id, self._client, quiet=True)
        self._ended = True
        if not self.paths.call_result.exists():
            raise FailedJobError(
                f"job {self.job_id} ended ({summary.state}, exit {summary.exit_code}) without a "
                f"result: {summary.exit_reason or 'no reason recorded'}; see {self.paths.logs}"
            )
        with open(self.paths.call_result, "rb") as f:
            status, value = cloudpickle.load(f)
        if status != "success":
            raise FailedJobError(f"job {self.job_id}: the function raised; its traceback:\n{value}")
        return value


def submit(
    spec: str | ClusterSpec | None,
    fn: Callable[..., Any],
    *args: Any,
    nodes: int = 1,
    job_options: dict[str, Any] | None = None,
    client: SlurmClient | None = None,
    **kwargs: Any,
) -> Job:
    """Run ``fn(*args, **kwargs)`` as the driver of a job over ``nodes`` nodes; returns a Job.

    ``spec``: a spec path, a ClusterSpec, or None ($CLUSTER_SPEC_PATH). ``job_options``: what
    `slurm-rl submit` takes as flags (``time``, ``partition``, ``cpus_per_node``, ``name``, ...).
    """
    from submitit.helpers import DelayedSubmission

    from .submission.submit import submit as submit_job

    resolved = spec if isinstance(spec, ClusterSpec) else load_spec(spec)
    if resolved.cluster_type != "slurm":
        raise UsageError(f"slurm_rl.submit needs a SLURM spec; {resolved.cluster_name!r} is {resolved.cluster_type!r}")
    if not callable(fn):
        raise UsageError(f"slurm_rl.submit: fn must be callable, got {type(fn).__name__}")
    options = dict(job_options or {})
    options.setdefault("name", default_name(fn))
    opts = resolve_options(resolved, str(CALL_DRIVER), nodes=nodes, user=current_user(), **options)
    call = DelayedSubmission(fn, *args, **kwargs)
    client = client or api_client()
    done = submit_job(resolved, opts, client, stage_extra=lambda stage: call.dump(stage.call_pickle))
    return Job(done.job_id, done.paths, client)


def map_array(
    spec: str | ClusterSpec | None,
    fn: Callable[..., Any],
    *iterables: Any,
    nodes: int = 1,
    max_concurrent: int | None = None,
    job_options: dict[str, Any] | None = None,
    client: SlurmClient | None = None,
) -> list[Job]:
    """``fn(*args)`` for each ``args`` in ``zip(*iterables)`` (submitit's ``map_array``), as
    one SLURM job array: task i runs the i-th call as the driver of its own ``nodes``-node Ray
    cluster. Returns one Job per call, in order (``job.result()``, ``job.job_id`` = ARRAY_TASK)."""
    from submitit.helpers import DelayedSubmission

    from .sweep import Point, submit_sweep

    resolved = spec if isinstance(spec, ClusterSpec) else load_spec(spec)
    if not callable(fn):
        raise UsageError(f"slurm_rl.map_array: fn must be callable, got {type(fn).__name__}")
    calls = [tuple(args) for args in zip(*iterables)]
    if not calls:
        raise UsageError("slurm_rl.map_array: no calls (give at least one non-empty iterable of arguments)")
    options = dict(job_options or {})
    options.setdefault("name", default_name(fn))
    opts = resolve_options(resolved, str(CALL_DRIVER), nodes=nodes, user=current_user(), **options)
    points = [Point((), {f"arg{k}": repr(a)[:60] for k, a in enumerate(args)}) for args in calls]
    client = client or api_client()
    done = submit_sweep(
        resolved,
        opts,
        points,
        client,
        max_concurrent=max_concurrent,
        stage_task=lambda i, stage: DelayedSubmission(fn, *calls[i]).dump(stage.call_pickle),
    )
    return [Job(t, paths, client) for t, paths in zip(done.task_ids, done.task_paths())]
