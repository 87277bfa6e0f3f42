"""What ``/proc/PID/environ`` of a fork shows. The kernel reads it from the block of strings the
process was exec'd with, so a fork that takes the client's environment (``os.environ``) would
still show the fork server's: a worker's ``RANK``, its job's variables, gone for ``ps e``,
``slurm-rl stacks`` and a site's tools. The server is started with room in that block
(``ROOM_ENV``, forking.py), and a fork writes its own environment over the block, the rest of it
one ``ROOM_ENV`` variable, as setproctitle does for the command line. A fork whose environment
would not fit is exec'd.

Safe because the fork has already replaced every variable (``os.environ.clear()`` unsets each,
so libc's ``environ`` no longer points into the block). Imported by fork_child.py; no slurm_rl.
"""

import ctypes
import os

ROOM_ENV = "SLURM_RL_FORK_ENV_ROOM"
ROOM_BYTES = 64 << 10  # the server's own environment plus this; a worker's is ~2-10 KB more than the raylet's


def block(env: "dict[str, str]") -> bytes:
    """ENV as the kernel lays it out after an exec: ``KEY=VALUE\\0`` each."""
    return b"".join(os.fsencode(k) + b"=" + os.fsencode(v) + b"\0" for k, v in env.items())


def env_area() -> "tuple[int, int]":
    """This process's environment block: its start and end address (/proc/PID/stat's fields 50
    and 51, Linux 3.5 and later); (0, 0) where it cannot be read."""
    try:
        with open("/proc/self/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        return int(fields[47]), int(fields[48])  # fields after the name start at field 3
    except (OSError, IndexError, ValueError):
        return 0, 0


def show(data: bytes, area: "tuple[int, int]") -> None:
    """Write DATA (``block``'s, at most as long as AREA, this process's ``env_area``) over the
    environment block."""
    start, end = area
    rest = end - start - len(data)
    name = ROOM_ENV.encode()
    # the rest as one variable, not thousands of empty strings for `tr '\0' '\n'` to print
    pad = name + b"=" + b"." * (rest - len(name) - 2) + b"\0" if rest > len(name) + 2 else b"\0" * rest
    ctypes.memmove(start, data + pad, end - start)
