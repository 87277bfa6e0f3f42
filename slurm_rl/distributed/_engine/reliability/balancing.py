"""More items than workers: ``run_balanced`` hands a list of items to a group's data-parallel
workers (one per tied group, every member of the group called) and returns the results in input
order. ``round_robin`` gives item i to worker i mod n up front; ``least_loaded`` keeps one item
in flight per worker and gives the next item to whichever worker finishes first."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..futures import WorkerRefs
from ..group_state import GroupState

STRATEGIES = ("round_robin", "least_loaded")


def check_strategy(enable: bool, strategy: str | None) -> str | None:
    """The group's strategy: None when load balancing is off; giving a strategy turns it on."""
    if strategy is not None and strategy not in STRATEGIES:
        raise ValueError(f"load_balancing_strategy={strategy!r}: use one of {', '.join(STRATEGIES)}")
    if strategy is not None:
        return strategy
    return "round_robin" if enable else None


class Balancer:
    """``run_balanced`` of one group: items spread over its data-parallel workers."""

    def __init__(self, state: GroupState, get_results: Callable[[Any], list[Any]]) -> None:
        self.state, self.get_results = state, get_results

    def run_balanced(
        self,
        method_name: str,
        items: list[Any],
        *,
        strategy: str | None = None,
        common_kwargs: dict[str, Any] | None = None,
    ) -> list[Any]:
        """``method_name(item, **common_kwargs)`` for every item, spread over the data-parallel
        workers by ``strategy`` (default: the group's ``load_balancing_strategy``); results in
        input order."""
        import ray

        strategy = strategy or self.state.settings.load_balancing_strategy
        if strategy is None:
            raise ValueError(
                "run_balanced: this group has no load balancing; build it with "
                "enable_load_balancing=True or load_balancing_strategy=..., or pass strategy="
            )
        check_strategy(True, strategy)
        targets = [list(g) for g in self.state.tied_workers_groups]
        if not targets:
            raise ValueError("run_balanced: the group has no workers")
        common = {k: ray.put(v) for k, v in (common_kwargs or {}).items()}
        results: list[Any] = [None] * len(items)

        def dispatch(i: int, target: int) -> list[Any]:
            ref = ray.put(items[i])
            return [self.state.call(w, method_name, ref, **common) for w in targets[target]]

        if strategy == "round_robin":
            issued = [(i, i % len(targets), dispatch(i, i % len(targets))) for i in range(len(items))]
            for i, target, refs in issued:
                results[i] = self.get_results(WorkerRefs(refs, targets[target]))[0]
            return results
        in_flight: dict[Any, tuple[int, int, list[Any]]] = {}
        queue = iter(range(len(items)))
        for target in range(len(targets)):
            first = next(queue, None)
            if first is None:
                break
            refs = dispatch(first, target)
            in_flight[refs[0]] = (first, target, refs)
        while in_flight:
            ready, _ = ray.wait(list(in_flight), num_returns=1)
            i, target, refs = in_flight.pop(ready[0])
            results[i] = self.get_results(WorkerRefs(refs, targets[target]))[0]
            nxt = next(queue, None)
            if nxt is not None:
                new = dispatch(nxt, target)
                in_flight[new[0]] = (nxt, target, new)
        return results
