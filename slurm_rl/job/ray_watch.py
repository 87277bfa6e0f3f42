"""This node's Ray daemons, watched while the job runs: a raylet (every node) or the GCS (node 0)
that dies is named at once, with how it died, instead of surfacing later as a driver's
``ActorDiedError`` or a GCS reconnect timeout a minute on. The bootstrap is the daemons' child
subreaper (node_env.py) and nothing else reaps them before the node's cleanup, so the watch reaps
a dead one itself and reads its signal or exit code. A daemon that ends while the node is told
to stop (scancel, the time limit, the job's end) is no news and is not reported."""

from __future__ import annotations

import os
import signal
from dataclasses import dataclass

DAEMONS = ("raylet", "gcs_server")  # by process name (comm)
REPORT_AFTER_S = 0.5


@dataclass(frozen=True)
class Died:
    daemon: str
    pid: int
    how: str  # "killed by SIGKILL", "exited 1", "gone" (reaped elsewhere)


def how_it_ended(status: int) -> str:
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        try:
            return f"killed by {signal.Signals(sig).name}"
        except ValueError:
            return f"killed by signal {sig}"
    return f"exited {os.WEXITSTATUS(status)}"


class RayWatch:
    """The daemons among this process's children, found once Ray has started here (``arm``),
    each polled for its end."""

    def __init__(self) -> None:
        self.pids: dict[int, str] = {}
        self.armed = False
        self.seen: list[tuple[float, Died]] = []  # ended, not reported yet: (when seen, what)

    def arm(self) -> None:
        """Take the daemons among this process's descendants. A process named as a daemon whose
        parent is one is not one: it is the daemon's fork on its way to exec (the raylet forks
        each worker, named "raylet" until it execs). Taken, it was reported as the raylet "gone"
        once the worker it became ended (a node arming while its job's actors started)."""
        import psutil

        for child in psutil.Process().children(recursive=True):
            try:
                name = child.name()
                parent = child.parent()
                forked = parent is not None and parent.name() in DAEMONS
            except psutil.Error:
                continue
            if name in DAEMONS and not forked:
                self.pids[child.pid] = name
        self.armed = True

    def due(self, now: float, after_s: float = REPORT_AFTER_S) -> list[Died]:
        """The daemons that ended at least ``after_s`` ago (a death from the signal that stops the
        node, scancel's SIGTERM to every process of the step, comes with the node's own stop:
        by then the node knows it is stopping and reports nothing)."""
        self.seen += [(now, died) for died in self.poll()]
        out = [died for t, died in self.seen if now - t >= after_s]
        self.seen = [(t, died) for t, died in self.seen if now - t < after_s]
        return out

    def poll(self) -> list[Died]:
        """The daemons that ended since the last poll."""
        out = []
        for pid, daemon in list(self.pids.items()):
            try:
                done, status = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:  # not our child any more (reaped elsewhere): gone if not alive
                if _alive(pid):
                    continue
                done, status = pid, -1
            if done == 0:
                continue
            del self.pids[pid]
            out.append(Died(daemon, pid, "gone" if status == -1 else how_it_ended(status)))
        return out


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
