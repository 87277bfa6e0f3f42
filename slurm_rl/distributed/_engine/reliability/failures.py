"""WorkerFailureError, and how a group collects results so that a dead worker becomes that error
quickly (no waiting on the other workers' calls first) and names who died, where, and why."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ray.exceptions import RayActorError

POLL_S = 0.5


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


def gather(refs: list[Any], workers: list[int], explain: Any) -> list[Any]:
    """``ray.get(refs)``, but a RayActorError of any ref raises at once (not after the refs
    before it finish) as WorkerFailureError; ``explain(worker_ids)`` builds its FailedWorkers.
    Other errors (the worker's own exception) are Ray's, unchanged."""
    import ray

    if not refs:
        return []
    try:
        return ray.get(list(refs), timeout=POLL_S)  # the common case: everything answers quickly
    except ray.exceptions.GetTimeoutError:
        pass
    except RayActorError:
        return _raise_dead(refs, workers, explain)
    pending = list(refs)
    while pending:
        ready, pending = ray.wait(pending, num_returns=len(pending), timeout=POLL_S, fetch_local=False)
        for ref in ready:
            try:
                ray.get(ref)
            except RayActorError:
                return _raise_dead(refs, workers, explain)
            except Exception:  # noqa: BLE001 - the worker's own error: raised below, in order
                pass
    try:
        return ray.get(list(refs))
    except RayActorError:
        return _raise_dead(refs, workers, explain)


def dead_among(refs: list[Any], workers: list[int]) -> list[int]:
    """Workers whose finished refs hold an actor error."""
    import ray

    ready, _ = ray.wait(list(refs), num_returns=len(refs), timeout=0, fetch_local=False)
    ready_set = set(ready)
    dead = []
    for ref, w in zip(refs, workers):
        if ref in ready_set:
            try:
                ray.get(ref)
            except RayActorError:
                dead.append(w)
            except Exception:  # noqa: BLE001
                pass
    return sorted(set(dead))


def _raise_dead(refs: list[Any], workers: list[int], explain: Any) -> list[Any]:
    raise WorkerFailureError(explain(dead_among(refs, workers)))
