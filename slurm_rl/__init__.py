"""slurm-rl: one Ray cluster per SLURM job, torn down completely when the job ends.

Layout, by where code runs (docs/architecture.md has the picture and the import rule):
``core/`` (the job dir's contract, shared by every stage), ``data/`` (NeMo RL's data types),
``slurm/`` and ``config/`` (the SLURM client and the cluster spec, login side), ``login/`` (the
login node: CLI, render, submit, teardown), ``job/`` (inside the allocation: node bootstrap,
cleanup), ``distributed/`` (the driver API: NeMo RL's names as facades over ``_engine/``),
``driver/`` (helpers a driver calls).
"""

from __future__ import annotations

from typing import Any

from ._version import __version__ as __version__


def on_preempt(callback):
    """Register a callback for SLURM's warning signal (see slurm_rl.driver.preempt.on_preempt)."""
    from .driver.preempt import on_preempt as _on_preempt

    _on_preempt(callback)


def requeue(reason: str = "") -> Any:
    """Ask SLURM for another attempt of this job and exit the driver (see slurm_rl.driver.preempt)."""
    from .driver.preempt import requeue as _requeue

    _requeue(reason)


def run_dir() -> Any:
    """Where this run keeps what outlives one job (checkpoints): the chain's shared directory
    (``--chain``), else the job dir (a local run's dir under ``slurm-rl run``); a Path."""
    from .core.job_env import JobEnvironment

    found = JobEnvironment.current().run_dir
    if found is None:
        raise RuntimeError("slurm_rl.run_dir(): not inside a slurm-rl job or run (SLURM_RL_JOB_DIR is unset)")
    return found


def plot_job(job_dir: Any) -> Any:
    """Write metrics.png and timeline.png into a job dir (see slurm_rl.login.plots)."""
    from .login.plots import plot_job as _plot_job

    return _plot_job(job_dir)


def __getattr__(name: str) -> Any:
    if name == "MetricsLog":
        from .driver.metrics import MetricsLog

        return MetricsLog
    raise AttributeError(f"module 'slurm_rl' has no attribute {name!r}")


def submit(spec: Any, fn: Any, *args: Any, **kwargs: Any) -> Any:
    """Run ``fn(*args)`` as a job's driver; ``.result()`` waits for it (see slurm_rl.login.api)."""
    from .login.api import submit as _submit

    return _submit(spec, fn, *args, **kwargs)


def map_array(spec: Any, fn: Any, *iterables: Any, **kwargs: Any) -> Any:
    """``fn(*args)`` for each args in ``zip(*iterables)``, one job array task each (see slurm_rl.login.api)."""
    from .login.api import map_array as _map_array

    return _map_array(spec, fn, *iterables, **kwargs)
