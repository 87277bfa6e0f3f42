"""A local Ray this process starts (``slurm-rl run``'s ``init_ray()``, the unit tests' Rays):
lean (``lean_node.without_dashboard``), no worker prestarted per CPU (``RAY_SYSTEM_CONFIG``),
and started again where Ray's own wait for its raylet ran out.

Ray waits a fixed 30 s (``ray/_private/node.py``, not configurable) for the raylet it started to
register with its GCS, then raises "The current node timed out during startup". On a busy
machine (measured on a 2-core CI machine at load 10: two of ci84's and ci86's unit modules) the
raylet is slow, not broken. The processes that attempt started (the GCS, the raylet and what
they started) are this process' new children: they are ended, then Ray is started once more."""

from __future__ import annotations

import logging
from typing import Any

import psutil

from ...core.job_env import RAY_SYSTEM_CONFIG
from .lean_node import without_dashboard

logger = logging.getLogger("slurm_rl")

STARTUP_TIMEOUT = "timed out during startup"  # Ray's message when its raylet wait runs out
ATTEMPTS = 3


def start_local_ray(**init: Any) -> None:
    """``ray.init(**init)`` starting a local Ray, lean and without prestarted workers (a
    ``_system_config`` given is added to slurm-rl's); up to ATTEMPTS starts where Ray's startup
    wait ran out, each failed one's processes ended first. Any other error is Ray's, at once."""
    import ray

    system = {**RAY_SYSTEM_CONFIG, **init.pop("_system_config", {})}
    for attempt in range(1, ATTEMPTS + 1):
        before = {p.pid for p in psutil.Process().children(recursive=True)}
        try:
            with without_dashboard():
                ray.init(**init, _system_config=dict(system))  # a copy: Ray adds its own keys to it
            return
        except Exception as exc:
            if STARTUP_TIMEOUT not in str(exc) or attempt == ATTEMPTS:
                raise
            ended = end_new_children(before)
            ray.shutdown()
            logger.warning(
                "local Ray: its raylet missed Ray's 30 s startup wait (start %d of %d; a busy machine?): "
                "ended the %d processes it started, starting it again",
                *(attempt, ATTEMPTS, ended),
            )


def end_new_children(before: set[int]) -> int:
    """Kill this process' descendants that are not in ``before``; how many there were."""
    new = [p for p in psutil.Process().children(recursive=True) if p.pid not in before]
    for p in new:
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(new, timeout=10)
    return len(new)
