"""WorkerFailureError, and how a group collects results so that a dead worker becomes that error
quickly (no waiting on the other workers' calls first) and names who died, where, and why."""

from __future__ import annotations

from typing import Any

from ray.exceptions import RayActorError

from ..errors import FailedWorker, WorkerFailureError  # noqa: F401 - importable here as before

POLL_S = 0.5


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
