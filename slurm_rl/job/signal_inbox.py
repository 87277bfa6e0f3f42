"""A node bootstrap's signals, noted by the handler and acted on by the lifecycle's loop.

The handler takes no lock. Signals come in bursts (SLURM's SIGTERM to every process of the step,
the container runtime's forward of it, srun's own), and Python runs a handler inside another
one: a handler that takes a lock (``threading.Event.set``'s, a file buffer's) while an outer one
holds it waits for itself forever. Seen at a time limit in an Apptainer job: the bootstrap hung
in its handler, SLURM killed it KillWait later, before its cleanup, and its temp dir stayed."""

from __future__ import annotations

import signal


class SignalInbox:
    def __init__(self) -> None:
        self._got: list[int] = []
        self._seen: set[signal.Signals] = set()

    def handler(self, signum: int, _frame: object) -> None:
        if signum != signal.SIGCONT:  # scancel sends SIGCONT before SIGTERM
            self._got.append(signum)  # a list's append takes no Python-level lock

    def take(self) -> list[signal.Signals]:
        """The signals noted since the last call that never came before, oldest first: a burst
        of SIGTERMs is one stop, logged and passed to the driver once."""
        out = []
        while self._got:
            sig = signal.Signals(self._got.pop(0))
            if sig not in self._seen:
                self._seen.add(sig)
                out.append(sig)
        return out
