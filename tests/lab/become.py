"""How root runs a command as one of the lab's ordinary users (tests/lab/slurm-lab-users.sh
makes them), for the tests and the benchmarks alike (bench/_lab.py; standard library only)."""

from __future__ import annotations

import os
import pwd
import sys
from pathlib import Path


def user_argv(user: str, argv: list[str], env: dict[str, str] | None = None) -> list[str]:
    """``argv`` run as ``user`` as its login would set it up: its HOME, USER and LOGNAME, PATH
    with this interpreter's bin first, and ``env`` (the rest of the environment is kept). setpriv
    execs ``argv`` itself (runuser would wait in a parent of its own that swallows SIGINT and
    outlives a kill): signals and exits reach the user's process as they do a user's terminal's."""
    own = {"HOME": pwd.getpwnam(user).pw_dir, "USER": user, "LOGNAME": user}
    own["PATH"] = f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}"
    become = ["setpriv", f"--reuid={user}", f"--regid={user}", "--init-groups", "--"]
    return [*become, "env", *(f"{k}={v}" for k, v in {**own, **(env or {})}.items()), *argv]
