"""What a dispatch hands back: MultiWorkerFuture (NeMo RL's name and shapes, also a plain
list of ObjectRefs), AsyncWorkerResults (completion order, ``async_communication`` groups) and
WorkerRefs (refs that know their workers, for failure reports and retries)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any


class AsyncWorkerResults:
    """What ``run_all_workers_*`` return on an ``async_communication=True`` group: iterate it
    for ``(worker_index, result)`` in completion order; ``.refs`` are the ObjectRefs (worker
    order) and ``.get()`` the results in worker order. A dead worker raises WorkerFailureError."""

    def __init__(self, refs: list[Any], workers: list[int], group: Any) -> None:
        self.refs, self.workers, self._group = refs, workers, group

    def __len__(self) -> int:
        return len(self.refs)

    def __iter__(self) -> Iterator[tuple[int, Any]]:
        import ray

        owner = dict(zip(self.refs, self.workers))
        pending = list(self.refs)
        while pending:
            ready, pending = ray.wait(pending, num_returns=1)
            for ref in ready:
                yield owner[ref], self._group.get_results(WorkerRefs([ref], [owner[ref]]))[0]

    def get(self) -> list[Any]:
        return self._group.get_results(WorkerRefs(self.refs, self.workers))


class WorkerRefs(list):
    """A list of ObjectRefs that knows its workers (and, for a retry, the call)."""

    def __init__(self, refs: list[Any], workers: list[int], call: tuple[str, tuple, dict] | None = None) -> None:
        super().__init__(refs)
        self.workers, self.call = workers, call


class MultiWorkerFuture(list):
    """Futures of one dispatch. ``used_workers`` (alias ``called_workers``) says which worker
    each future belongs to; results come back one per tied group (``respect_tied_workers``), or
    only from ``return_from_workers`` when given (sharded dispatch), else all in order.

    It is also the list of the dispatch's ObjectRefs: NeMo RL 2026 returns a plain list from
    ``run_all_workers_multiple_data`` and its users (and the seed-era docs' example) call
    ``ray.get(...)`` on it, while the seed era returned this object: both work."""

    __hash__ = object.__hash__  # type: ignore[assignment]  # identity, as before it was a list

    def __init__(
        self,
        futures: list[Any],
        used_workers: list[int] | None = None,
        respect_tied_workers: bool = True,
        *,
        return_from_workers: list[int] | None = None,
        called_workers: list[int] | None = None,
    ) -> None:
        super().__init__(futures)
        self.futures = futures
        self.used_workers = list(used_workers if used_workers is not None else called_workers or range(len(futures)))
        self.called_workers = self.used_workers
        self.respect_tied_workers = respect_tied_workers
        self.return_from_workers = return_from_workers

    def get_results(self, worker_group: Any) -> list[Any]:
        """The results (see the class doc). A dead worker raises WorkerFailureError naming it,
        as soon as Ray knows, even while other workers' calls still run."""
        getter = getattr(worker_group, "get_results", None)
        if getter is not None:
            results = getter(WorkerRefs(self.futures, self.used_workers))
        else:
            import ray

            results = ray.get(self.futures)
        if self.return_from_workers is not None:
            keep = set(self.return_from_workers)
            return [r for w, r in zip(self.used_workers, results) if w in keep]
        if not self.respect_tied_workers:
            return results
        by_worker = dict(zip(self.used_workers, results))
        out = []
        for group in worker_group.tied_workers_groups:
            first = next((w for w in group if w in by_worker), None)
            if first is not None:
                out.append(by_worker[first])
        return out

    def as_completed(self, worker_group: Any) -> Iterator[tuple[int, Any]]:
        """``(worker_index, result)`` of every called worker, in completion order."""
        return iter(AsyncWorkerResults(self.futures, self.used_workers, worker_group))
