"""Start a Ray node's fork server with its raylet, and point the raylet's Python at it.

A raylet that slurm-rl starts (lean_node.py) runs every Python process of its node, each
worker and its two agents, through ``light_setup/forked.py``: a fork of the node's fork server
(fork_server.py), which has imported Ray once, instead of a fresh interpreter importing Ray
again (~0.4-0.6 CPU-s and ~40 MB of private memory each, measured in docs/measurements.md).
What a fork cannot reproduce (a uv environment's interpreter, other interpreter flags, a
container's entrypoint) still starts as Ray starts it. ``SLURM_RL_RAY_FORK=0`` turns it off.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from slurm_rl.distributed.worker_env.fork_environ import ROOM_BYTES, ROOM_ENV

HERE = Path(__file__).resolve().parent
FORK_SERVER = HERE / "fork_server.py"
FORKED = HERE / "light_setup" / "forked.py"
CHOICE_ENV = "SLURM_RL_RAY_FORK"
SOCKET_NAME = "srl_fork"
MAX_SOCKET_PATH = 100  # a unix socket's path is at most 107 bytes
WORKER_FLAG = "--python_worker_command="
BIND_WAIT_S = 3.0  # a busy node's Python takes ~0.1 s to bind; without the socket Ray starts as usual
PIPE_CHECK = "RAY_enable_pipe_based_agent_to_parent_health_check"
AGENT_FLAGS = ("--dashboard_agent_command=", "--runtime_env_agent_command=")


def forking_enabled() -> bool:
    return os.environ.get(CHOICE_ENV, "1").strip().lower() not in ("0", "no", "false", "off")


def raylet_arg(command: list[str], flag: str) -> str | None:
    return next((c[len(flag) :] for c in command if c.startswith(flag)), None)


def with_fork_server(command: list[str], scripts: list[str]) -> tuple[list[str], dict[str, str]]:
    """The raylet's COMMAND, its Python processes whose script is one of SCRIPTS run through
    the node's fork server, which this starts, and the variables the raylet needs for it; COMMAND
    unchanged where it is not a raylet's, forking is off, or a path would not survive the
    raylet's parsing of its commands.

    The agents watch their raylet through the pipe the raylet gives them as stdin (Ray's
    ``RAY_enable_pipe_based_agent_to_parent_health_check``): a forked agent's parent is not the
    raylet, so Ray's other check, by parent pid, would take the raylet for dead."""
    session_dir = raylet_arg(command, "--session_dir=")
    if session_dir is None or raylet_arg(command, WORKER_FLAG) is None or not forking_enabled() or sys.flags.no_site:
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
