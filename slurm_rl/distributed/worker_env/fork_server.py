"""A Ray node's fork server: Ray's Python processes on the node start as forks of a process that
has already imported what they import, instead of each importing it anew.

The raylet of a node slurm-rl starts (forking.py) runs its Python workers and its two agents
through ``light_setup/forked.py``: that client sends its command, environment, working
directory and limits, with its stdin/stdout/stderr, and a fork becomes that command (``runpy``,
as ``python script.py`` runs it). The fork registers with the raylet under its own pid, as a
worker behind Ray's setup script does; the client stands in for it towards the raylet (it
exits with the fork's status; a signal to it reaches the fork; if it dies, the fork is killed).

Two levels, because Ray's C++ config reads the ``RAY_*`` environment once, when Ray is
imported, and the raylet gives each job's workers their own (``RAY_JOB_ID``):
- the server imports Ray's dependencies (gRPC, protobuf, aiohttp, psutil, ...), not Ray;
- per distinct ``RAY_*`` environment (the agents'; each Ray job's workers) it forks a zygote
  that takes that environment and imports Ray; that zygote forks the processes.
A client whose interpreter, flags, ``PYTHON*`` (but PYTHONPATH) or ``LD_*`` variables differ from
the server's (a uv environment, a container) gets ``exec`` and execs its command itself; one whose
PYTHONPATH differs is forked with sys.path made of it, unless it would hide an imported module.

The server serves until the raylet it served ends (the first client's parent) or the process
that started it does; a zygote ends with the server, its forks after a grace (SIGKILL). Both
stay single-threaded: only then is a fork a clean copy. A script: no slurm_rl import.
"""

import importlib.util
import json
import os
import selectors
import socket
import sys
import time
from collections.abc import Callable

from fork_child import Loop, Zygote, become, close_all, pythonpath, receive, say_once, send  # this folder: a script
from fork_environ import ROOM_ENV
from fork_rule import unlike

DEPENDENCIES = ("grpc", "google.protobuf", "psutil", "aiohttp.web", "msgpack", "yaml", "jsonschema", "filelock")
RAY_MODULES = (  # what Ray's workers and agents import first (Ray 2.60)
    "ray",
    "ray._private.node",
    "ray._private.parameter",
    "ray._private.ray_logging",
    "ray._private.runtime_env.setup_hook",
    "ray._private.async_compat",
    "ray._private.process_watcher",
    "ray._private.logging_utils",
    "ray.actor",
    "ray.runtime_env",
)


NO_RAYLET_S = 120.0  # a raylet starts its agents at once: a server no process came to is not needed


def client_fingerprint() -> Callable[[], dict]:
    """The client's own ``fingerprint`` (light_setup/forked.py), loaded from its file: what no fork
    can change is then computed one way on both sides (the client imports nothing of this folder).
    Not put on sys.path, which the forks inherit."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "light_setup", "forked.py")
    spec = importlib.util.spec_from_file_location("slurm_rl_fork_client", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.fingerprint


def differs(ours: dict, theirs: dict) -> str:
    """Which of the facts of ``fingerprint`` differs, the variables by name; "" when none does."""
    for key, value in ours.items():
        if theirs.get(key) != value:
            if key != "env":
                return f"{key} differs"
            other = theirs.get(key) or {}
            names = sorted(n for n in set(value) | set(other) if value.get(n) != other.get(n))
            return f"env differs ({', '.join(names)})"
    return ""


def added_startup_code() -> list[str]:
    """The sitecustomize/usercustomize modules this interpreter ran at start that are not its
    distribution's own (Debian's, in /etc/python3.X, only installs an exception hook, which a
    fork inherits): code of the site's or the user's that may do something per process (a
    fault injector, a coverage hook), which a fork would skip."""
    import sysconfig

    own = (os.path.realpath(sysconfig.get_paths()["stdlib"]) + os.sep, "/etc/python")
    out = []
    for name in ("sitecustomize", "usercustomize"):
        module = sys.modules.get(name)
        path = os.path.realpath(getattr(module, "__file__", None) or "") if module else ""
        if module is not None and not path.startswith(own):
            out.append(name)
    return out


def ray_env(env: "dict[str, str]") -> str:
    return json.dumps(sorted((k, v) for k, v in env.items() if k.startswith("RAY_")))


def preload(names: "tuple[str, ...]") -> None:
    """Import NAMES, then keep the collector off what they made: a fork's collections then do
    not write to (and so copy) the pages it shares with this process."""
    import gc

    for name in names:
        try:
            __import__(name)
        except Exception:  # noqa: BLE001 - a module that will not import is only not preloaded
            pass
    gc.freeze()


def same_uid(conn: socket.socket) -> bool:
    """Whether the peer runs as this server's user (SO_PEERCRED: pid, uid, gid). The socket sits
    in the session dir, inside the job's node-local dir (mode 0700), so nobody else reaches it;
    this holds even where the dir was opened."""
    import struct

    try:
        _, uid, _ = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))
    except OSError:
        return False
    return uid == os.geteuid()


class Server:
    """Accepts clients on the node's socket and hands each to the zygote of its environment."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.listener.bind(path)
        self.listener.listen(128)
        self.ours = client_fingerprint()()  # the same facts of this interpreter
        self.env = {k: v for k, v in os.environ.items() if k != ROOM_ENV}  # what it started and imported under
        self.zygote_env: dict[str, str] = {}
        self.hooks = added_startup_code()
        self.said: set[str] = set()
        self.zygotes: dict[str, tuple[int, socket.socket]] = {}
        self.raylet: int | None = None

    def serve(self) -> "socket.socket | None":
        """Serve until the node's Ray ends (None); in a new zygote, return its control socket."""
        self.loop = Loop()
        self.loop.selector.register(self.listener, selectors.EVENT_READ, "accept")
        parent, started = os.getppid(), time.monotonic()
        while os.getppid() == parent:
            if self.raylet is None and time.monotonic() - started > NO_RAYLET_S:
                break  # the raylet never started a process: its start failed, none will come
            for what, _ in self.loop.events(1.0):
                if what == "raylet":
                    self.stop()
                    return None
                control = self.accept()
                if control is not None:
                    return control
            self.reap()
        self.stop()
        return None

    def accept(self) -> "socket.socket | None":
        conn, _ = self.listener.accept()
        if not same_uid(conn):  # a stranger who could ask for a fork would run code as this user
            conn.close()
            return None
        conn.settimeout(10)
        try:
            request, fds = receive(conn, 3)
        except (EOFError, OSError, ValueError):
            conn.close()
            return None
        self.watch_raylet(conn)
        why = differs(self.ours, request["fingerprint"]) or unlike(self.env, request["env"], keyed="RAY_")
        why = why or (f"{self.hooks[0]} runs in each process" if self.hooks else "")
        if why:
            say_once(self.said, why)
            close_all(fds)
            send(conn, {"exec": why})
            conn.close()
            return None
        key = ray_env(request["env"])
        if key not in self.zygotes:
            control = self.start_zygote(key, request["env"], [*fds, conn.fileno()])
            if control is not None:
                return control
        _, control = self.zygotes[key]
        try:
            send(control, request, [*fds, conn.fileno()])
        except OSError:
            send(conn, {"exec": "no zygote"})
        close_all(fds)
        conn.close()
        return None

    def start_zygote(self, key: str, env: "dict[str, str]", in_hand: "list[int]") -> "socket.socket | None":
        """Fork the zygote of KEY; in it, return its control socket (IN_HAND, the request's fds
        and connection, closed there: the zygote gets them again through that socket)."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            ours.close()
            close_all(in_hand)
            self.loop.close()
            self.listener.close()
            for _, control in self.zygotes.values():
                control.close()
            os.environ.clear()
            os.environ.update(env)
            self.zygote_env = dict(env)
            preload(RAY_MODULES)
            return theirs
        theirs.close()
        self.zygotes[key] = (pid, ours)
        return None

    def watch_raylet(self, conn: socket.socket) -> None:
        """The first client's parent is the raylet: when it ends, so does this server."""
        if self.raylet is not None:
            return
        self.raylet = -1
        creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12)
        try:
            with open(f"/proc/{int.from_bytes(creds[:4], sys.byteorder)}/stat") as f:
                self.raylet = int(f.read().rsplit(")", 1)[1].split()[1])
            self.loop.selector.register(os.pidfd_open(self.raylet), selectors.EVENT_READ, "raylet")
        except (OSError, ValueError, IndexError, AttributeError):
            pass

    def reap(self) -> None:
        while True:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            for key, (zygote, control) in list(self.zygotes.items()):
                if zygote == pid:
                    control.close()
                    del self.zygotes[key]

    def stop(self) -> None:
        self.listener.close()
        try:
            os.unlink(self.path)
        except OSError:
            pass
        for _, control in self.zygotes.values():
            control.close()  # each zygote stops its forks and ends


def main(path: str) -> None:
    base, start = pythonpath(dict(os.environ), os.getcwd()), list(sys.path)
    server = Server(path)
    preload(DEPENDENCIES)
    control = server.serve()
    if control is None:
        return
    request = Zygote(control, base, start, server.zygote_env).serve()
    if request is None:
        return
    script = become(request)
    import runpy

    runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    main(sys.argv[1])
