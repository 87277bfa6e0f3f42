"""Fixtures shared by the unit tests of the driver API."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

import pytest
import ray

from slurm_rl.distributed.worker_env.local_start import start_local_ray


@contextlib.contextmanager
def local_ray(**resources: object) -> Iterator[None]:
    """An embedded local Ray with these (logical) resources, no token, no dashboard: started as
    `init_ray` starts a local run's (no dashboard process, a minimal agent, no prestarted workers,
    again where Ray's raylet wait ran out on a busy machine)."""
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    start_local_ray(include_dashboard=False, **resources)
    try:
        yield
    finally:
        ray.shutdown()


@pytest.fixture(scope="module")
def many_gpu_ray() -> Iterator[None]:
    """Room for the documentation's examples as written ([8, 8] GPU bundles and more)."""
    with local_ray(num_cpus=24, num_gpus=24):
        yield
