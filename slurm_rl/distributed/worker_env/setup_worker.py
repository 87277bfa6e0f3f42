"""Which script the raylet runs in front of a worker that has a runtime_env.

Every worker process of a task or actor with a runtime_env (a worker group's env_vars, the
job-level runtime_env that ``init_ray`` sets, a uv environment's py_executable) is started by
the raylet through a setup script. Ray's own imports all of Ray to set a few variables and exec
the worker (~1.2 CPU-s and ~1.2 s of wall per worker); slurm-rl's (``light_setup/``) does the
same with the standard library. A Ray node started by slurm-rl (a job's ``ray start``, a local
run's ``ray.init``) gets slurm-rl's; ``SLURM_RL_RAY_SETUP_WORKER=ray`` keeps Ray's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ...core.job_env import SETUP_WORKER_ENV, Settings

LIGHT_SETUP_WORKER = Path(__file__).resolve().parent / "light_setup" / "setup_worker.py"
CHOICE_ENV = SETUP_WORKER_ENV


def use_light_setup_worker() -> bool:
    """From now on, Ray nodes this process starts run slurm-rl's setup script (unless
    ``SLURM_RL_RAY_SETUP_WORKER=ray``); True when they will. Idempotent."""
    if Settings.current().ray_setup_worker:
        return False
    import ray._private.node as ray_node

    init = ray_node.Node.__init__
    if getattr(init, "slurm_rl_light_setup", False):
        return True

    def init_with_light_setup(self: Any, ray_params: Any, *args: Any, **kwargs: Any) -> None:
        if getattr(ray_params, "setup_worker_path", None) is None:
            ray_params.setup_worker_path = str(LIGHT_SETUP_WORKER)
        init(self, ray_params, *args, **kwargs)

    init_with_light_setup.slurm_rl_light_setup = True  # type: ignore[attr-defined]
    ray_node.Node.__init__ = init_with_light_setup  # type: ignore[method-assign]
    return True
