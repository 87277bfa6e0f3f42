"""``PY_EXECUTABLES``: the Python environment a worker class runs in. ``SYSTEM`` is this
interpreter; the others are ``uv run`` command lines over extras of the driver's own uv project
(``[project.optional-dependencies]`` of the nearest pyproject.toml above the working directory:
``--directory`` names it, shell-quoted, so a path with a space survives ``shlex.split``). A worker
registered with one gets that environment built once per node per job (worker_env/uv_envs.py).
``NEMO_RL_PY_EXECUTABLES_SYSTEM=1`` (read when this is built) makes every name this interpreter."""

from __future__ import annotations

import os
import shlex
import sys

SYSTEM_FLAG = "NEMO_RL_PY_EXECUTABLES_SYSTEM"

# name -> extras of the project (NeMo RL 2026's names)
EXTRAS: dict[str, tuple[str, ...]] = {
    "BASE": (),
    "VLLM": ("vllm",),
    "FSDP": ("fsdp",),
    "AUTOMODEL": ("automodel",),
    "MCORE": ("mcore",),
    "NEMO_GYM": ("nemo_gym",),
    "VLLM_GYM": ("vllm", "nemo_gym"),
    "SGLANG": ("sglang",),
    "TRTLLM": ("trtllm",),
    "MODELOPT_VLLM": ("modelopt", "vllm"),
    "MODELOPT_AUTOMODEL": ("modelopt", "automodel"),
    "MODELOPT_MCORE": ("modelopt", "mcore"),
}


def project_root(start: str | None = None) -> str:
    """The nearest directory at or above ``start`` (the working directory) holding a
    pyproject.toml; ``start`` itself when none does."""
    here = os.path.abspath(start or os.getcwd())
    directory = here
    while not os.path.isfile(os.path.join(directory, "pyproject.toml")):
        parent = os.path.dirname(directory)
        if parent == directory:
            return here
        directory = parent
    return directory


def uv_command(extras: tuple[str, ...] | list[str], root: str) -> str:
    """``uv run --locked [--extra X ...] --directory ROOT`` with ROOT shell-quoted."""
    return " ".join(["uv run --locked", *(f"--extra {e}" for e in extras), f"--directory {shlex.quote(root)}"])


def make_py_executables(root: str) -> type:
    """The PY_EXECUTABLES class for a project root (all SYSTEM under the flag)."""
    system = os.environ.get(SYSTEM_FLAG, "0") == "1"
    names: dict[str, str] = {"SYSTEM": sys.executable}
    for name, extras in EXTRAS.items():
        names[name] = sys.executable if system else uv_command(extras, root)
    doc = "Python environments for workers: SYSTEM (this interpreter) or a `uv run` over the project's extras."
    return type("PY_EXECUTABLES", (), {**names, "__doc__": doc, "__module__": __name__})
