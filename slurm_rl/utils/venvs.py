"""NeMo RL's ``nemo_rl.utils.venvs.create_local_venv``: build a ``PY_EXECUTABLES`` environment
(``uv run --locked --extra mcore`` and friends) on this machine, under a name, and return its
python. Workers never need this (slurm-rl builds their environments per node, see
``distributed/worker_env/uv_envs.py``); it is for scripts and tests that want one at hand.

The environment goes to ``$NEMO_RL_VENV_DIR/<name>`` (or ``$SLURM_RL_VENV_DIR``, else
``~/.cache/slurm-rl/venvs``); an environment already built there is reused unless
``force_rebuild``."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from ..core.job_env import VENV_DIR_ENV, Settings
from ..distributed.worker_env.uv_envs import build, parse_uv_run

VENV_DIR_ENVS = ("NEMO_RL_VENV_DIR", VENV_DIR_ENV)


def venv_root() -> Path:
    chosen = os.environ.get("NEMO_RL_VENV_DIR") or Settings.current().venv_dir
    if chosen:
        return Path(chosen)
    return Path.home() / ".cache" / "slurm-rl" / "venvs"


def create_local_venv(py_executable: str, venv_name: str, force_rebuild: bool = False) -> str:
    """The python of the environment ``py_executable`` describes, built at ``<root>/<venv_name>``."""
    if not venv_name or "/" in venv_name or venv_name in (".", ".."):
        raise ValueError(f"create_local_venv: venv_name {venv_name!r} must be a plain directory name")
    spec = parse_uv_run(py_executable)
    path = venv_root() / venv_name
    if force_rebuild and path.exists():
        shutil.rmtree(path)
    return str(build(spec, str(path))["python"])
