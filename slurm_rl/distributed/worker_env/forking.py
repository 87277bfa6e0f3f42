"""Start a Ray node's fork server with its raylet, and point the raylet's Python at it.

A raylet that slurm-rl starts (lean_node.py) runs every Python process of its node, each
worker and its two agents, through ``light_setup/forked.py``: a fork of the node's fork server
(fork_server.py), which has imported Ray once, instead of a fresh interpreter importing Ray
again (~0.4-0.6 CPU-s and ~40 MB of private memory each, measured in docs/measurements.md).
One rule decides: a fork is used only where it cannot be told from an exec. Every fork shares
its server's hash seed (CPython draws it once, at start, and cannot draw another without
breaking every str's cached hash), while exec'd siblings each draw their own: so a node forks
only when its environment fixes ``PYTHONHASHSEED`` (an exec'd worker then has that seed too).
By default it does not, and nothing forks. Where it does, a process whose interpreter, flags or
environment differ in anything read before the program reads it (fork_rule.py) is
still exec'd. ``SLURM_RL_RAY_FORK=0`` turns it off even then.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from slurm_rl.core.job_env import FORK_ENV, Settings
from slurm_rl.distributed.worker_env.fork_environ import ROOM_BYTES, ROOM_ENV

HERE = Path(__file__).resolve().parent
FORK_SERVER = HERE / "fork_server.py"
FORKED = HERE / "light_setup" / "forked.py"
CHOICE_ENV = FORK_ENV
SOCKET_NAME = "srl_fork"
MAX_SOCKET_PATH = 100  # a unix socket's path is at most 107 bytes
WORKER_FLAG = "--python_worker_command="
BIND_WAIT_S = 3.0  # a busy node's Python takes ~0.1 s to bind; without the socket Ray starts as usual
PIPE_CHECK = "RAY_enable_pipe_based_agent_to_parent_health_check"
AGENT_FLAGS = ("--dashboard_agent_command=", "--runtime_env_agent_command=")


def forking_enabled() -> bool:
    return Settings.current().ray_fork


def hash_seed_fixed(env: dict[str, str] | os._Environ[str] = os.environ) -> bool:
    """Whether PYTHONHASHSEED fixes every interpreter's seed (an integer, not "random")."""
    seed = env.get("PYTHONHASHSEED", "").strip()
    return seed.isdigit() and int(seed) <= 4294967295


def may_fork() -> bool:
    """Forks on this node cannot be told from exec'd processes (the module's rule)."""
    return forking_enabled() and hash_seed_fixed() and not sys.flags.no_site


def raylet_arg(command: list[str], flag: str) -> str | None:
    return next((c[len(flag) :] for c in command if c.startswith(flag)), None)


def with_fork_server(command: list[str], scripts: list[str]) -> tuple[list[str], dict[str, str]]:
    """The raylet's COMMAND, its Python processes whose script is one of SCRIPTS run through
    the node's fork server, which this starts, and the variables the raylet needs for it; COMMAND
    unchanged where it is not a raylet's, forks could be told from exec'd processes (``may_fork``),
    or a path would not survive the raylet's parsing of its commands.

    The agents watch their raylet through the pipe the raylet gives them as stdin (Ray's
    ``RAY_enable_pipe_based_agent_to_parent_health_check``): a forked agent's parent is not the
    raylet, so Ray's other check, by parent pid, would take the raylet for dead."""
    session_dir = raylet_arg(command, "--session_dir=")
    if session_dir is None or raylet_arg(command, WORKER_FLAG) is None or not may_fork():
        return command, {}
    path = os.path.join(session_dir, "sockets", SOCKET_NAME)
    if len(path) > MAX_SOCKET_PATH or any(ch in s for s in (path, str(FORKED)) for ch in " \t\"'\\"):
        return command, {}
    os.makedirs(os.path.dirname(path), exist_ok=True)
    start_server(path, os.path.join(session_dir, "logs", "slurm_rl_fork_server.log"))
    prefix = f"-S {FORKED} --via={path} "  # the client needs only the standard library
    out = []
    for arg in command:
        if arg.startswith((WORKER_FLAG, *AGENT_FLAGS)):
            for script in scripts:
                arg = arg.replace(script + " ", prefix + script + " ", 1)
        out.append(arg)
    return out, {PIPE_CHECK: "1"}


def start_server(path: str, log: str) -> subprocess.Popen:
    """The node's fork server, a child of this process: it binds PATH before it imports Ray, so
    the raylet's first Python process can connect at once and waits while the import finishes."""
    os.makedirs(os.path.dirname(log), exist_ok=True)
    with open(log, "ab") as out:
        server = subprocess.Popen(
            [sys.executable, *(["-s"] if sys.flags.no_user_site else []), str(FORK_SERVER), path],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=out,
            close_fds=True,
            env={**os.environ, ROOM_ENV: "." * ROOM_BYTES},  # room for each fork's own (fork_environ.py)
        )
    threading.Thread(target=server.wait, name="slurm-rl-fork-server-reaper", daemon=True).start()
    deadline = time.monotonic() + BIND_WAIT_S
    while not os.path.exists(path) and server.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    return server
