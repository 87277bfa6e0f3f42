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


def attempt() -> Any:
    """Which attempt of its job this is and how the last one ended: ``.attempt`` (0 first),
    ``.cause`` (core/causes.py's, None on the first), ``.reason``, ``.by_slurm`` (see
    slurm_rl.driver.attempt)."""
    from .driver.attempt import attempt as _attempt

    return _attempt()


def members() -> Any:
    """This job's member jobs (grown nodes, replacements) and their nodes now (slurm_rl.driver.members)."""
    from .driver.members import members as _members

    return _members()


def nodes() -> Any:
    """The job's node list now, its members' included (slurm_rl.driver.members)."""
    from .driver.members import nodes as _nodes

    return _nodes()


def on_member_change(callback, poll_s: float = 1.0) -> Any:
    """Call ``callback(event)`` when a member's node joins or leaves (slurm_rl.driver.members)."""
    from .driver.members import on_member_change as _on_member_change

    return _on_member_change(callback, poll_s)


def services() -> Any:
    """A job of parts' services: ``{NAME: {"url", "instances", "here", "ready", "total"}}``
    (slurm_rl.driver.services; docs/parts.md)."""
    from .driver.services import services as _services

    return _services()


def heartbeat(note: str = "") -> None:
    """Tell slurm-rl the run is making progress (besides metrics steps and the driver's own
    output): `status` shows it, and it keeps a job from counting as stalled (slurm_rl.driver.heartbeat)."""
    from .driver.heartbeat import heartbeat as _heartbeat

    _heartbeat(note)


def time_left() -> float:
    """Seconds until SLURM ends this job, from its end time (a changed time limit shows within
    15 s: node 0 asks SLURM that often); inf outside a SLURM job or without a limit
    (slurm_rl.driver.time_left)."""
    from .driver.time_left import time_left as _time_left

    return _time_left()


def run_dir() -> Any:
    """Where this run keeps what outlives one job (checkpoints): the chain's shared directory
    (``--chain``), else the job dir (a local run's dir under ``slurm-rl run``); a Path."""
    from .core.job_env import JobEnvironment

    found = JobEnvironment.current().run_dir
    if found is None:
        raise RuntimeError("slurm_rl.run_dir(): not inside a slurm-rl job or run (SLURM_RL_JOB_DIR is unset)")
    return found


def output_dir() -> Any:
    """Where the driver puts files for its user (samples, a final checkpoint's summary): the job
    dir's ``output/``, made on the first call; ``slurm-rl fetch JOB`` copies it home; a Path."""
    from .core.job_env import JobEnvironment
    from .core.paths import JobPaths

    job_dir = JobEnvironment.current().job_dir
    if job_dir is None:
        raise RuntimeError("slurm_rl.output_dir(): not inside a slurm-rl job or run (SLURM_RL_JOB_DIR is unset)")
    out = JobPaths(job_dir).output
    out.mkdir(parents=True, exist_ok=True)
    return out


def plot_job(job_dir: Any) -> Any:
    """Write metrics.png and timeline.png into a job dir (see slurm_rl.login.reading.plots)."""
    from .login.reading.plots import plot_job as _plot_job

    return _plot_job(job_dir)


def __getattr__(name: str) -> Any:
    if name == "MetricsLog":
        from .driver.metrics import MetricsLog

        return MetricsLog
    raise AttributeError(f"module 'slurm_rl' has no attribute {name!r}")


def submit(spec: Any, fn: Any, *args: Any, **kwargs: Any) -> Any:
    """Run ``fn(*args, **kwargs)`` as the driver of a SLURM job (submitit's ``submit``, with a Ray
    cluster over the job's nodes around it); returns a ``Job``: ``.job_id``, ``.paths`` (its job
    dir), ``.result()`` (waits, then returns what ``fn`` returned or raises what it raised).

    Parameters: ``spec`` (a cluster spec path, a ``ClusterSpec``, or None: ``$CLUSTER_SPEC_PATH``),
    ``fn`` (any picklable callable; it may call ``slurm_rl.distributed.init_ray()``), ``*args``
    and ``**kwargs`` (its arguments), ``nodes=1`` (keyword), ``job_options={...}`` (what
    `slurm-rl submit` takes as flags: ``time``, ``partition``, ``gpus_per_node``, ``name``, ...).
    Bad options raise one-line ``UsageError`` before anything is queued. Example (on the lab)::

        import slurm_rl

        def train(lr):
            from slurm_rl.distributed import init_ray
            import ray
            init_ray()
            return lr, len(ray.nodes())

        job = slurm_rl.submit("cluster_specs/lab.json", train, 3e-4, nodes=2, job_options={"time": "10"})
        print(job.job_id, job.result())  # (0.0003, 2)
    """
    from .login.api import submit as _submit

    return _submit(spec, fn, *args, **kwargs)


def map_array(spec: Any, fn: Any, *iterables: Any, **kwargs: Any) -> Any:
    """``fn(*args)`` for each args in ``zip(*iterables)``, one job array task each (see slurm_rl.login.api)."""
    from .login.api import map_array as _map_array

    return _map_array(spec, fn, *iterables, **kwargs)
