"""How a worker group calls its workers: the ``run_*`` family (``Dispatcher``, one per group,
over the group's ``GroupState``); what the calls hand back is in futures.py."""

from __future__ import annotations

import logging
import warnings
from collections.abc import Callable
from typing import Any

from .futures import AsyncWorkerResults, MultiWorkerFuture, WorkerRefs
from .group_state import GroupState
from .named_sharding import NamedSharding

logger = logging.getLogger(__name__)

ONLY_ON = ("all", "tied_leader", "all_tied_workers")


def split_on_axes(name: str, value: Any, axes: list[str], shape: dict[str, int]) -> Any:
    """Nested lists of ``value``'s parts, one level per sharded axis. A list must have one item
    per index of the axis; a BatchedDataDict is cut into that many equal shards."""
    from ...data.batched_data_dict import BatchedDataDict

    if not axes:
        return value
    axis, n = axes[0], shape[axes[0]]
    if isinstance(value, BatchedDataDict):
        if value.size % n:
            raise ValueError(
                f"run_all_workers_sharded_data: {name} has {value.size} rows, which do not divide "
                f"into {n} shards on axis {axis!r}; pad or drop rows to a multiple of {n}"
            )
        parts: list[Any] = value.shard_by_batch_size(n)
    elif isinstance(value, (list, tuple)):
        if len(value) != n:
            raise ValueError(
                f"run_all_workers_sharded_data: {name} has {len(value)} items for axis {axis!r} of "
                f"size {n}; give one item per index of the axis (or a BatchedDataDict to cut)"
            )
        parts = list(value)
    else:
        raise TypeError(
            f"run_all_workers_sharded_data: {name} must be a list with one item per {axis!r} index "
            f"or a BatchedDataDict, got {type(value).__name__}"
        )
    return [split_on_axes(name, p, axes[1:], shape) for p in parts]


def _pick(nested: Any, index: tuple[int, ...]) -> Any:
    for i in index:
        nested = nested[i]
    return nested


class Dispatcher:
    """The ``run_*`` family of one group. ``before_dispatch(workers)`` refuses (or restarts)
    workers known dead; ``owner`` (the group) collects results for AsyncWorkerResults."""

    def __init__(
        self, state: GroupState, sharding: NamedSharding, before_dispatch: Callable[[list[int]], None], owner: Any
    ) -> None:
        self.state, self.sharding, self.before_dispatch, self.owner = state, sharding, before_dispatch, owner

    def _targets(self, only_on: str) -> list[list[int]]:
        """Worker ids to call, grouped by tied group."""
        if only_on == "all":
            return [[w] for w in range(len(self.state.workers))]
        if only_on == "tied_leader":
            return [[g[0]] for g in self.state.tied_workers_groups]
        if only_on == "all_tied_workers":
            return [list(g) for g in self.state.tied_workers_groups]
        raise ValueError(f"only_on={only_on!r}: use one of {', '.join(ONLY_ON)}")

    def run_single_worker_single_data(self, method_name: str, worker_idx: int, *args: Any, **kwargs: Any) -> Any:
        """One call on worker ``worker_idx``; returns its ObjectRef."""
        if not 0 <= worker_idx < len(self.state.workers):
            raise IndexError(f"worker_idx {worker_idx} out of range: the group has {len(self.state.workers)} workers")
        self.before_dispatch([worker_idx])
        return self.state.call(worker_idx, method_name, *args, **kwargs)

    def rank_0_only(self, workers: list[int], axes: list[str] | None) -> list[int]:
        """``workers`` less those not at index 0 of every one of ``axes`` (NeMo RL 2026's
        ``run_rank_0_only_axes``). An axis the group's sharding lacks filters nothing, as in
        NeMo RL, but is logged: it is usually a typo."""
        if not axes:
            return workers
        names = self.sharding.names
        unknown = [a for a in axes if a not in names]
        if unknown:
            logger.warning("run_rank_0_only_axes: %s not among the group's sharding axes %s; ignored", unknown, names)
        used = [a for a in axes if a in names]
        return [w for w in workers if all(self.sharding.get_worker_coords(w)[a] == 0 for a in used)]

    def run_all_workers_single_data(
        self,
        method_name: str,
        *args: Any,
        only_on: str = "all",
        run_rank_0_only_axes: list[str] | None = None,
        **kwargs: Any,
    ) -> Any:
        """The same call on every target worker. Returns their ObjectRefs (a list, worker
        order; ``get_results`` blocks for them), or on an ``async_communication`` group an
        AsyncWorkerResults to iterate in completion order."""
        workers = self.rank_0_only([w for group in self._targets(only_on) for w in group], run_rank_0_only_axes)
        self.before_dispatch(workers)
        refs = [self.state.call(w, method_name, *args, **kwargs) for w in workers]
        if self.state.settings.async_communication:
            return AsyncWorkerResults(refs, workers, self.owner)
        return WorkerRefs(
            refs, workers, (method_name, args, kwargs) if self.state.settings.restart_on_failure else None
        )

    def run_all_workers_multiple_data(
        self,
        method_name: str,
        data: list[Any] | None = None,
        common_kwargs: dict[str, Any] | None = None,
        only_on: str = "all",
        *,
        run_rank_0_only_axes: list[str] | None = None,
        **per_worker: list[Any],
    ) -> MultiWorkerFuture:
        """Different data for each target. Two forms: ``data``, a list with one item per
        worker (or tied group with ``only_on``), each passed as the method's one positional
        argument (NeMo RL's first API); or, NeMo RL 2026, keyword lists
        (``values=[...]``, one entry per worker; worker i gets ``values=values[i]``), for the
        workers left by ``run_rank_0_only_axes``. Both return a MultiWorkerFuture, which is also
        the list of its ObjectRefs (``ray.get`` takes it)."""
        import ray

        from ...data.batched_data_dict import SlicedDataDict

        if data is None:
            return self._multiple_keyword_data(method_name, per_worker, common_kwargs, run_rank_0_only_axes)
        if per_worker:
            raise ValueError(
                f"run_all_workers_multiple_data: give the data either as a list (data=...) or as keyword lists "
                f"({', '.join(per_worker)}=[...]), not both"
            )
        targets = self._targets(only_on)
        if run_rank_0_only_axes:
            keep = set(self.rank_0_only([g[0] for g in targets], run_rank_0_only_axes))
            targets = [g for g in targets if g[0] in keep]
        if len(data) > len(targets):
            raise ValueError(
                f"{len(data)} data items but only {len(targets)} {'workers' if only_on == 'all' else 'tied groups'} "
                f"to give them to (only_on={only_on!r})"
            )
        if len(data) < len(targets):
            warnings.warn(
                f"{len(data)} data items for {len(targets)} targets: only the first {len(data)} get work", stacklevel=2
            )
        if any(not isinstance(d, SlicedDataDict) for d in data):
            warnings.warn("run_all_workers_multiple_data: data items are not SlicedDataDict", stacklevel=2)
        self.before_dispatch([w for group in targets[: len(data)] for w in group])
        futures, used = [], []
        for item, group in zip(data, targets):
            ref = ray.put(item)  # once per item; every worker of a tied group gets the same reference
            for w in group:
                futures.append(self.state.call(w, method_name, ref, **(common_kwargs or {})))
                used.append(w)
        return MultiWorkerFuture(futures, used, respect_tied_workers=only_on != "all")

    def _multiple_keyword_data(
        self,
        method_name: str,
        per_worker: dict[str, list[Any]],
        common_kwargs: dict[str, Any] | None,
        axes: list[str] | None,
    ) -> MultiWorkerFuture:
        """NeMo RL 2026's run_all_workers_multiple_data, with its checks and their texts."""
        if not per_worker:
            raise AssertionError(
                "At least one args (positional arguments) or kwargs (keyword arguments) must be provided in "
                "run_all_workers_multiple_data. Otherwise, please use run_all_workers_single_data."
            )
        counts = {len(v) for v in per_worker.values()}
        if len(counts) != 1:
            raise AssertionError(f"All kwargs must have the same length (got {sorted(counts)})")
        count = counts.pop()
        workers = self.rank_0_only(list(range(len(self.state.workers))), axes)
        if count != len(workers):
            if axes is None:
                raise AssertionError(
                    f"data length should be equal to the number of workers: data length = {count}, "
                    f"number of workers = {len(workers)}"
                )
            raise AssertionError(
                f"data length should be equal to the number of workers started: data length = {count}, "
                f"number of workers started = {len(workers)} (run_rank_0_only_axes={axes})"
            )
        self.before_dispatch(workers)
        common = common_kwargs or {}
        futures = [
            self.state.call(w, method_name, **{k: v[i] for k, v in per_worker.items()}, **common)
            for i, w in enumerate(workers)
        ]
        return MultiWorkerFuture(futures, workers, respect_tied_workers=False)

    def run_all_workers_sharded_data(
        self,
        method_name: str,
        *args: Any,
        in_sharded_axes: list[str] | None = None,
        replicate_on_axes: list[str] | None = None,
        output_is_replicated: list[str] | None = None,
        make_dummy_calls_to_free_axes: bool = False,
        common_kwargs: dict[str, Any] | None = None,
        **data: Any,
    ) -> MultiWorkerFuture:
        """Data cut along ``in_sharded_axes``, the same slice for every worker along
        ``replicate_on_axes``; on the other (free) axes only index 0 gets data (the rest get
        ``None`` with ``make_dummy_calls_to_free_axes``, else no call). Results come from index 0
        of the free axes and of ``output_is_replicated``. Each slice and each common kwarg is put
        in the object store once. Everything is checked before anything is scheduled."""
        import ray

        sharding = self.sharding
        sharded, replicated = list(in_sharded_axes or []), list(replicate_on_axes or [])
        for axis in [*sharded, *replicated, *(output_is_replicated or [])]:
            if axis not in sharding.names:
                raise ValueError(
                    f"run_all_workers_sharded_data: unknown axis {axis!r}; the group's sharding "
                    f"axes are {sharding.names} (sharding_annotations=)"
                )
        if set(sharded) & set(replicated):
            raise ValueError(
                f"run_all_workers_sharded_data: axes {sorted(set(sharded) & set(replicated))} are both "
                f"sharded and replicated"
            )
        named = {**{f"args[{i}]": a for i, a in enumerate(args)}, **data}
        split = {k: split_on_axes(k, v, sharded, sharding.shape) for k, v in named.items()}
        free = [a for a in sharding.names if a not in sharded and a not in replicated]
        common = {k: ray.put(v) for k, v in (common_kwargs or {}).items()}
        self.before_dispatch(list(range(len(self.state.workers))))
        refs: dict[tuple[int, ...], dict[str, Any]] = {}
        futures, called, returning = [], [], []
        for w in range(len(self.state.workers)):
            coords = sharding.get_worker_coords(w)
            receives = all(coords[a] == 0 for a in free)
            if receives and all(coords[a] == 0 for a in (output_is_replicated or [])):
                returning.append(w)
            if receives:
                key = tuple(coords[a] for a in sharded)
                if key not in refs:
                    refs[key] = {k: ray.put(_pick(v, key)) for k, v in split.items()}
                values = refs[key]
            elif make_dummy_calls_to_free_axes:
                values = {k: None for k in split}
            else:
                continue
            pos = [values[f"args[{i}]"] for i in range(len(args))]
            kw = {k: v for k, v in values.items() if not k.startswith("args[")}
            futures.append(self.state.call(w, method_name, *pos, **kw, **common))
            called.append(w)
        return MultiWorkerFuture(futures, called, respect_tied_workers=False, return_from_workers=returning)
