"""Run a Python script as a fork of the node's fork server, or, where it cannot be, as itself.

``python forked.py --via=SOCKET SCRIPT ARGS...`` is what the raylet of a node slurm-rl starts
runs for each Python worker and for its two agents (fork_server.py says why). This client sends
the server its command, environment, working directory, umask, limits, niceness, CPUs and
stdin/stdout/stderr; a fork of the server, with Ray already imported, becomes ``python SCRIPT
ARGS...``. The client then stands in for it: SIGTERM, SIGINT, SIGHUP, SIGQUIT and SIGUSR1/2 to
the client reach the fork, the client exits as the fork did, and if the client is killed the
server kills the fork. No server, or one that answers ``exec``: the client execs the command.

Started as a script by the raylet (or by bash behind the light setup script): standard library
only, nothing from its own folder.
"""

import json
import os
import signal
import socket
import sys

VIA = "--via="
FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)


def ignored_signals() -> list[int]:
    """The signals this process was started ignoring (SIGPIPE and SIGXFSZ: Python's own doing)."""
    out = []
    for sig in range(1, signal.NSIG):
        try:
            if signal.getsignal(sig) == signal.SIG_IGN and sig not in (signal.SIGPIPE, signal.SIGXFSZ):
                out.append(sig)
        except (OSError, ValueError):
            pass
    return out


IGNORED = ignored_signals()


# set in the fork as Python would at start (PYTHONBREAKPOINT: read at each breakpoint(); Ray's
# ray.init puts it in a driver's environment, which init_ray gives the job's workers)
SET_IN_FORK = ("PYTHONUNBUFFERED", "PYTHONPATH", "PYTHONBREAKPOINT")


def fingerprint() -> dict:
    """What no fork of the server can change, of this interpreter: where the server's differ (it
    runs this same function: fork_server.py), the client is answered ``exec``."""
    flags = {
        k: getattr(sys.flags, k) for k in dir(sys.flags) if not k.startswith(("_", "n_", "count", "index", "no_site"))
    }
    fixed = {k: v for k, v in os.environ.items() if k.startswith(("PYTHON", "LD_")) and k not in SET_IN_FORK}
    return {"executable": sys.executable, "flags": flags, "x": sys._xoptions, "env": fixed}


def request(command: list[str]) -> bytes:
    import resource

    limits = {
        name: resource.getrlimit(getattr(resource, name))
        for name in ("RLIMIT_NOFILE", "RLIMIT_NPROC", "RLIMIT_CORE", "RLIMIT_STACK", "RLIMIT_MEMLOCK")
    }
    body = {
        "argv": command,
        "env": dict(os.environ),
        "cwd": os.getcwd(),
        "umask": os.umask(os.umask(0)),
        "rlimits": limits,
        "nice": os.nice(0),
        "cpus": sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "pgid": os.getpgid(0),
        "ignored": IGNORED,  # as exec keeps them: e.g. the job's warning signal (SIGUSR2)
        "blocked": sorted(int(sig) for sig in signal.pthread_sigmask(signal.SIG_BLOCK, [])),
        "unbuffered": unbuffered(),
        "fingerprint": fingerprint(),
    }
    return json.dumps(body).encode()


def unbuffered() -> bool:
    """Whether this Python was started with ``-u`` (sys.flags does not say)."""
    return bool(getattr(sys.stdout, "write_through", False))


def exec_itself(command: list[str]) -> None:
    import subprocess

    flags = [f for f in subprocess._args_from_interpreter_flags() if f != "-S"]  # type: ignore[attr-defined]
    flags += ["-u"] if unbuffered() else []  # -S is the raylet's command for this client only
    os.execv(sys.executable, [sys.executable, *flags, *command])


def run_forked(path: str, command: list[str]) -> int | None:
    """The fork's exit code (negative: killed by that signal), or None where it did not start."""
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    conn.settimeout(10)
    try:
        conn.connect(path)
        socket.send_fds(conn, [request(command)], [0, 1, 2])
    except Exception:  # noqa: BLE001 - any trouble with the server: start as Ray would
        return None
    # Once sent, only the server's answer or its end may decide: a client that gave up waiting
    # and exec'd while a slow zygote still forked would make two of one worker. (Killed while
    # waiting, the client takes a fork that comes later along: the zygote kills it.)
    conn.settimeout(None)
    try:
        first = json.loads(conn.recv(65536) or b"{}")  # nothing: the server ended, no fork comes
    except (OSError, ValueError):
        return None
    pid = first.get("pid")
    if not pid:
        return None

    def forward(signum: int, _frame: object) -> None:
        try:
            os.kill(pid, signum)
        except ProcessLookupError:
            pass

    for sig in set(FORWARDED) - set(IGNORED):  # an ignored one stays so, here and in the fork
        signal.signal(sig, forward)
    conn.settimeout(None)
    last = conn.recv(65536)  # the fork's exit; nothing when the server is gone
    return int(json.loads(last).get("exit", 1)) if last else 1


def main(argv: list[str]) -> None:
    if not argv or not argv[0].startswith(VIA) or len(argv) < 2:
        raise SystemExit("usage: forked.py --via=SOCKET SCRIPT [ARGS...]")
    command = argv[1:]
    code = run_forked(argv[0][len(VIA) :], command)
    if code is None:
        exec_itself(command)
        return
    if code < 0:  # killed by a signal: end the same way
        sys.stdout.flush()
        try:
            signal.signal(-code, signal.SIG_DFL)  # (not allowed, nor needed, for SIGKILL)
        except (OSError, ValueError):
            pass
        os.kill(os.getpid(), -code)
        code = 128 - code  # a signal whose default is not to end: the shell's code for it
    os._exit(code & 0xFF)


if __name__ == "__main__":
    main(sys.argv[1:])
