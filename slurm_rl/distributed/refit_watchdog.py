"""A refit (weights from the trainer to the generation workers over a StatelessProcessGroup)
whose peer died would wait in NCCL forever. ``RefitWatchdog`` bounds it: a block that runs past
its timeout has its group aborted from a timer thread; the collective in flight then returns,
``fired`` says why, and every later broadcast on the group raises ``RefitAborted``, so the
caller rebuilds the group instead of blaming a missing communicator (NeMo RL 2026's
``nemo_rl.distributed.refit_watchdog``)."""

from __future__ import annotations

import threading
from types import TracebackType
from typing import Any

from ..core.errors import SlurmRlError


class RefitAborted(SlurmRlError, RuntimeError):
    """A collective on a group that was aborted (a refit whose peer went away)."""


class RefitWatchdog:
    def __init__(self, group: Any, timeout_s: float) -> None:
        if timeout_s <= 0:
            raise ValueError(f"RefitWatchdog: timeout_s must be > 0, got {timeout_s}")
        self.group, self.timeout_s, self.fired = group, timeout_s, False
        self._timer: threading.Timer | None = None

    def _fire(self) -> None:
        self.fired = True
        self.group.abort()

    def __enter__(self) -> RefitWatchdog:
        self._timer = threading.Timer(self.timeout_s, self._fire)
        self._timer.daemon = True
        self._timer.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if self._timer is not None:
            self._timer.cancel()
