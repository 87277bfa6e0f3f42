"""What a worker process's environment is made of: runtime_env layering, and the hygiene that
keeps launcher variables out of workers (NeMo RL issue 309: a worker that inherits SLURM_*,
PMI_*, OMPI_* ... thinks it is an MPI/SLURM rank; one that inherits RAY_JOB_ID or
RAY_RAYLET_PID from a parent Ray process confuses a Ray it starts itself).

Ray starts workers from the raylet, which on a node of a SLURM job inherited the job step's
environment, and a runtime_env can add variables but not remove them. So the job-level
runtime_env that ``init_ray`` sets carries a worker setup hook that removes them in every
worker process, in the driver's environment and in isolated ones (the hook is shipped by value,
so an isolated environment needs no slurm_rl).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from ...core.stacks import arm

LAUNCHER_PREFIXES = ("SLURM_", "SLURMD_", "PMI_", "PMIX_", "OMPI_", "MPI_")
INHERITED_RAY_VARS = ("RAY_JOB_ID", "RAY_RAYLET_PID")
# Ray's own record of a previous job's setup hook (set in the driver's os.environ by ray.init):
# passed on, it makes the next ray.init refuse our hook as a conflict.
RAY_SETUP_HOOK_VAR = "__RAY_WORKER_PROCESS_SETUP_HOOK_ENV_VAR"


def is_launcher_var(name: str) -> bool:
    return name.startswith(LAUNCHER_PREFIXES) or name in INHERITED_RAY_VARS


# Defaults the user's environment may override: torch's C++ warnings (c10d's "hostname could
# not be resolved" lines from gloo on every rendezvous) would open every worker's output.
WORKER_ENV_DEFAULTS = {"TORCH_CPP_LOG_LEVEL": "ERROR"}


def worker_env_vars(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The user's environment for workers, minus launcher variables, over quiet defaults."""
    env = os.environ if environ is None else environ
    mine = {k: v for k, v in env.items() if not is_launcher_var(k) and k != RAY_SETUP_HOOK_VAR}
    return {**WORKER_ENV_DEFAULTS, **mine}


def scrub_launcher_env() -> None:
    """Worker setup hook: arm this worker's stack dump where the job's node asks for it
    (core/stacks.py: ``slurm-rl stacks`` and stall reports), then drop launcher variables from
    its environment (and so from every process it starts). Self-contained: it runs where
    slurm_rl may not exist (``arm_stack_dump`` travels with it, by value)."""
    import os as _os

    arm_stack_dump(_os.environ.get("SLURM_RL_STACKS_DIR", ""), "worker")
    prefixes = ("SLURM_", "SLURMD_", "PMI_", "PMIX_", "OMPI_", "MPI_")
    for name in list(_os.environ):
        if name.startswith(prefixes) or name in ("RAY_JOB_ID", "RAY_RAYLET_PID"):
            del _os.environ[name]


arm_stack_dump = arm  # by this name in the hook's globals, by import path and by value alike

# the hook by import path: for Ray Client drivers, whose job config Ray pickles plainly (a
# by-value function cannot travel); the job's nodes run slurm_rl's Python, so the name resolves
SETUP_HOOK_NAME = f"{__name__}.scrub_launcher_env"


def setup_hook() -> Any:
    """``scrub_launcher_env`` as a value Ray pickles by value (not by module reference), with
    ``arm_stack_dump`` by value in its globals."""
    import types

    plain = {"__builtins__": __builtins__}
    armed = types.FunctionType(arm.__code__, plain, "arm_stack_dump")
    return types.FunctionType(scrub_launcher_env.__code__, {**plain, "arm_stack_dump": armed}, "scrub_launcher_env")


def merge_runtime_env(*layers: Mapping[str, Any] | None) -> dict[str, Any]:
    """Later layers win; ``env_vars`` are merged key by key instead of replaced."""
    out: dict[str, Any] = {}
    for layer in layers:
        if not layer:
            continue
        for key, value in layer.items():
            if key == "env_vars":
                out["env_vars"] = {**out.get("env_vars", {}), **(value or {})}
            else:
                out[key] = value
    return out
