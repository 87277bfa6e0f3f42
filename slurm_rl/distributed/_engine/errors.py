"""Every error the distributed side raises on its own, in one module (as ``ray.exceptions``),
at the engine's floor; ``slurm_rl.distributed.exceptions`` is their public path, and each is
also importable where NeMo RL has it. Each message is one line that names what failed and
what to do (a worker's remote traceback follows a build error's first line)."""

from __future__ import annotations

import re
import traceback
from dataclasses import dataclass
from typing import Any

from ray.exceptions import RayActorError


class ResourceInsufficientError(Exception):
    """The Ray cluster lacks what a virtual cluster (or a topology segment) needs."""


class WorkerBuildError(RuntimeError):
    """A worker could not be created (import error, constructor exception, configure_worker
    error). Names the worker index, its node and the (remote) traceback; the group has removed
    every worker it had created."""

    def __init__(self, index: int, name: str, node: str, cause: BaseException) -> None:
        self.index, self.node, self.cause = index, node, cause
        detail, root = explain_cause(cause)
        super().__init__(f"worker {index} ({name}) on {node} failed to build: {root}\n{detail}")


_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_ROOT = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt|Warning)\b.*")


def explain_cause(cause: BaseException) -> tuple[str, str]:
    """(the worker's own traceback, its last error line). A Ray error carries the remote
    traceback in its text: that is shown (without Ray's caret lines and colours), not the
    driver's frames inside ray.get; the root error (``ModuleNotFoundError: No module named
    'torchh'``) is what the message leads with."""
    text = str(cause) if "File " in str(cause) else "".join(traceback.format_exception(cause))
    lines = [ln for ln in _ANSI.sub("", text).splitlines() if ln.strip() and set(ln.strip()) != {"^"}]
    roots = [ln for ln in lines if _ROOT.match(ln)]
    root = roots[-1] if roots else f"{type(cause).__name__}: {lines[0] if lines else cause!r}"
    return "\n".join(ln for ln in lines if ln is not roots[-1]) if roots else "\n".join(lines), root


class WorkerBuildValueError(WorkerBuildError, ValueError):
    """A WorkerBuildError whose cause is a ValueError (e.g. a class name that does not import):
    ``except ValueError`` keeps catching it, as before."""


def build_error(index: int, name: str, node: str, cause: BaseException) -> WorkerBuildError:
    cls = WorkerBuildValueError if isinstance(cause, ValueError) else WorkerBuildError
    return cls(index, name, node, cause)


@dataclass
class FailedWorker:
    index: int
    rank: int
    node: str
    cause: str

    def __str__(self) -> str:
        return f"worker {self.index} (rank {self.rank}) on node {self.node}: {self.cause}"


class WorkerFailureError(RayActorError):
    """One or more workers of a group died (process killed, over its memory limit, node lost).
    ``failures`` lists each with index, rank, node and cause. A subclass of Ray's
    ``RayActorError``: ``except RayActorError`` keeps catching it."""

    def __init__(self, failures: list[FailedWorker], note: str = "") -> None:
        self.failures = failures
        lines = "\n".join(f"  {f}" for f in failures)
        n = len(failures)
        msg = f"{n} worker{'s' if n != 1 else ''} of the group failed:\n{lines}"
        if note:
            msg += f"\n{note}"
        super().__init__(error_msg=msg)

    @property
    def worker_indices(self) -> list[int]:
        return [f.index for f in self.failures]

    @property
    def nodes(self) -> list[str]:
        return sorted({f.node for f in self.failures})

    @property
    def causes(self) -> list[str]:
        return [f.cause for f in self.failures]

    def __reduce__(self) -> tuple[Any, ...]:
        return (WorkerFailureError, (self.failures,))
