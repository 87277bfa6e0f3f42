"""The process side of the node's fork server (fork_server.py): the zygote, which has imported
Ray under one ``RAY_*`` environment and forks each request the server hands it, and what a fork
does to become the client's command (``become``). Also the wire format both use: one JSON
message per packet of a ``SOCK_SEQPACKET`` socket, the client's stdin/stdout/stderr (and, from
server to zygote, the client's connection) passed along with it.

Imported by fork_server.py, which runs as a script from this folder; no slurm_rl import.
"""

import json
import os
import selectors
import signal
import socket
import sys
import time
from typing import Any

import fork_environ  # this folder: fork_server.py runs as a script
from fork_rule import unlike

GRACE_S = 2.0  # once the raylet is gone, how long forks get to notice it before SIGKILL
PACKET = 1 << 20
# a zygote none of whose forks is alive for this long ends: Ray ends a job's workers with the job
RETIRE_S = float(os.environ.get("SLURM_RL_FORK_RETIRE_S") or 10.0)


def receive(sock: socket.socket, max_fds: int) -> "tuple[dict, list[int]]":
    data, fds, _, _ = socket.recv_fds(sock, PACKET, max_fds)
    if not data:
        raise EOFError
    return json.loads(data), list(fds)


def send(sock: socket.socket, message: dict, fds: "list[int] | None" = None) -> None:
    socket.send_fds(sock, [json.dumps(message).encode()], fds or [])


def close_all(fds: "list[int]") -> None:
    for fd in fds:
        os.close(fd)


class Loop:
    """A single-threaded select loop that wakes on SIGCHLD."""

    def __init__(self) -> None:
        self.selector = selectors.DefaultSelector()
        self.wake_r, wake_w = os.pipe()
        os.set_blocking(wake_w, False)
        self.wake_w = wake_w
        signal.set_wakeup_fd(wake_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.signal(signal.SIGTERM, lambda *_: None)
        self.selector.register(self.wake_r, selectors.EVENT_READ, "wake")

    def events(self, timeout: float) -> list[tuple[str, Any]]:
        out: list[tuple[str, Any]] = []
        for key, _ in self.selector.select(timeout):
            if key.data == "wake":
                os.read(self.wake_r, 512)
            else:
                out.append((key.data, key.fileobj))
        return out

    def close(self) -> None:
        self.selector.close()
        os.close(self.wake_r)
        os.close(self.wake_w)


def say_once(said: "set[str]", why: str) -> None:
    """Why a process is exec'd, once per reason, in the server's log (logs/slurm_rl_fork_server.log)."""
    if why not in said:
        said.add(why)
        print(f"slurm-rl fork server: {why}: such processes start as Ray starts them", flush=True)


def pythonpath(env: "dict[str, str]", cwd: str) -> "list[str]":
    """The sys.path entries Python makes of PYTHONPATH at start: absolute, from the cwd."""
    raw = env.get("PYTHONPATH")
    return [os.path.normpath(os.path.join(cwd, p)) if p else cwd for p in raw.split(os.pathsep)] if raw else []


def path_conflict(theirs: "list[str]", base: "list[str]") -> str:
    """Why a process with PYTHONPATH entries THEIRS may not be a fork of this one, started with
    BASE: a new entry holds a module imported here from elsewhere, or a module here came from an
    entry it lacks. "" when it may (its sys.path is then set as Python would have)."""
    names = {name for name in sys.modules if "." not in name}
    for entry in (p for p in theirs if p not in base):
        try:
            found = {item.split(".", 1)[0] for item in os.listdir(entry)} & names
        except NotADirectoryError:  # a zip archive, say: what it holds is not looked into here
            return f"PYTHONPATH entry {entry} is not a folder"
        except OSError:
            continue
        if found:
            return f"PYTHONPATH entry {entry} has {sorted(found)[0]}, imported here from elsewhere"
    for entry in (p for p in base if p not in theirs):
        for module in list(sys.modules.values()):
            if (getattr(module, "__file__", None) or "").startswith(entry + os.sep):
                return f"{module.__name__} was imported from {entry}, not on this PYTHONPATH"
    return ""


class Zygote:
    """Ray imported under one ``RAY_*`` environment; forks each request it is handed."""

    def __init__(self, control: socket.socket, base: "list[str]", start: "list[str]", env: "dict[str, str]") -> None:
        self.env = env  # the environment it imported Ray under
        self.idle_since: float | None = None  # when its last fork ended
        self.base = base  # the PYTHONPATH entries this process's sys.path was made with
        self.start = start  # its sys.path before it imported anything
        self.area = fork_environ.env_area()  # a fork's too: where its /proc/PID/environ is read from
        self.said: set[str] = set()
        self.control = control
        self.loop = Loop()
        self.loop.selector.register(control, selectors.EVENT_READ, "control")
        self.forks: dict[int, socket.socket] = {}  # fork pid -> its client
        self.clients: dict[socket.socket, int] = {}

    def serve(self) -> "dict | None":
        while True:
            for what, obj in self.loop.events(1.0):
                if what == "control":
                    try:
                        request, fds = receive(self.control, 4)
                    except (EOFError, OSError, ValueError):
                        self.stop()
                        return None
                    if self.fork(request, fds):
                        return request
                else:
                    self.client_gone(obj)
            self.reap()
            if self.retired():
                return None

    def retired(self) -> bool:
        """No fork alive for RETIRE_S (Ray ends a job's workers with the job) and no request
        waiting: the zygote ends. A request sent meanwhile finds the control socket closed and
        its client execs (the server forgets this zygote when it reaps it)."""
        if self.forks:
            self.idle_since = None
            return False
        now = time.monotonic()
        self.idle_since = self.idle_since or now
        if now - self.idle_since < RETIRE_S or self.loop.selector.select(0):
            return False
        self.control.close()
        return True

    def fork(self, request: dict, fds: "list[int]") -> bool:
        client = socket.socket(fileno=fds[3])
        client.setblocking(True)  # the server's timeout left the shared file non-blocking
        request["pythonpath"] = pythonpath(request["env"], request["cwd"])
        request["environ"], room = fork_environ.block(request["env"]), self.area[1] - self.area[0]
        why = unlike(self.env, request["env"])
        if not why and len(request["environ"]) > room:
            why = f"its environment is larger than the {room} bytes /proc/PID/environ has room for"
        why = why or path_conflict(request["pythonpath"], self.base)
        if why:
            say_once(self.said, why)
            close_all(fds[:3])
            send(client, {"exec": why})
            client.close()
            return False
        request["base"], request["start"], request["area"] = self.base, self.start, self.area
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            request["fds"] = fds[:3]
            self.loop.close()
            for conn in [self.control, client, *self.clients]:
                conn.close()
            return True
        close_all(fds[:3])
        try:
            send(client, {"pid": pid})
        except OSError:
            os.kill(pid, signal.SIGKILL)
        self.forks[pid] = client
        self.clients[client] = pid
        self.loop.selector.register(client, selectors.EVENT_READ, "client")
        return False

    def reap(self) -> None:
        while self.forks:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            client = self.forks.pop(pid, None)
            if client is not None:
                self.clients.pop(client, None)
                self.loop.selector.unregister(client)
                try:
                    send(client, {"exit": os.waitstatus_to_exitcode(status)})
                except OSError:
                    pass
                client.close()

    def client_gone(self, client: socket.socket) -> None:
        """A client that ends before its fork (killed by the raylet, SIGKILL) takes it along."""
        pid = self.clients.get(client)
        if pid is not None and client.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b"":
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def stop(self) -> None:
        """The server is gone: the forks get GRACE_S to notice their raylet is too, then SIGKILL."""
        deadline = time.monotonic() + GRACE_S
        while self.forks and time.monotonic() < deadline:
            self.reap()
            time.sleep(0.05)
        for pid in list(self.forks):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def become(request: dict) -> str:
    """In the fork: take on the client's process state, as an exec of its command would have."""
    ignored = set(request["ignored"]) | {signal.SIGPIPE, signal.SIGXFSZ}  # the last two: as Python does
    for sig in set(range(1, signal.NSIG)) - {signal.SIGKILL, signal.SIGSTOP}:
        handler: Any = signal.SIG_IGN if sig in ignored else signal.SIG_DFL
        if sig == signal.SIGINT and sig not in ignored:
            handler = signal.default_int_handler
        try:
            signal.signal(sig, handler)
        except (OSError, ValueError):
            pass
    signal.set_wakeup_fd(-1)
    signal.pthread_sigmask(signal.SIG_SETMASK, request["blocked"])
    try:
        os.setpgid(0, request["pgid"])
    except OSError:
        pass
    for target, fd in enumerate(request["fds"]):
        os.dup2(fd, target)
    os.closerange(3, 65536)
    os.chdir(request["cwd"])
    os.umask(request["umask"])
    os.environ.clear()
    os.environ.update(request["env"])
    fork_environ.show(request["environ"], request["area"])  # what /proc/PID/environ shows (ps e, stacks)
    import resource

    for name, limits in request["rlimits"].items():
        try:
            resource.setrlimit(getattr(resource, name), tuple(limits))
        except (OSError, ValueError):
            pass
    try:  # only root may lower it: a fork stays as nice as its zygote then
        os.nice(request["nice"] - os.nice(0))
    except OSError:
        pass
    if request.get("cpus"):
        try:
            os.sched_setaffinity(0, request["cpus"])
        except OSError:
            pass
    argv = request["argv"]
    sys.argv = list(argv)
    # as Python makes it: the script's folder, the client's PYTHONPATH, the rest of ours; before
    # them what imports added (Ray's thirdparty_files, inserted first as in an exec'd worker)
    added = [p for p in sys.path if p not in request["start"]]
    rest = request["start"][1 + len(request["base"]) :]
    sys.path[:] = [*added, os.path.dirname(os.path.abspath(argv[0])), *request["pythonpath"], *rest]
    import importlib

    importlib.invalidate_caches()  # folders the zygote listed may have changed within its mtime's tick
    if request["unbuffered"]:
        for stream in (sys.stdout, sys.stderr):
            stream.reconfigure(write_through=True)  # type: ignore[union-attr]
    import random

    random.seed()  # (os.fork reseeds it too) and numpy's global state, where it is imported: as a fresh start
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        numpy.random.seed()
    try:  # the command line the raylet gave the client, for ps and slurm-rl's stacks
        import ray._raylet

        ray._raylet.setproctitle(  # type: ignore[attr-defined]
            " ".join([sys.executable, *(["-u"] if request["unbuffered"] else []), *argv])
        )
    except Exception:  # noqa: BLE001 - without it ps shows the server's command line
        pass
    return argv[0]
