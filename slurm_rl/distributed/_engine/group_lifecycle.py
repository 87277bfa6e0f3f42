"""A worker group's life, the engine's top: created (laid out, memory reserved, built, watched;
on any failure everything released) and shut down (the cleanup method on the living workers,
then every worker killed)."""

from __future__ import annotations

import logging
from collections.abc import Iterator

from .calls import CallTracker
from .cluster_view import Slot
from .group_state import GroupState
from .launch import build_workers
from .layout import plan_workers
from .reliability.memory_limits import MemoryLimits
from .reliability.restarts import Restarts

logger = logging.getLogger(__name__)


def create_group(
    state: GroupState,
    memory: MemoryLimits,
    slots: list[list[Slot]],
    tied: list[tuple[int, list[int]]],
    named_groups: bool,
    unnamed: Iterator[int],
) -> None:
    # Actor names are unique per Ray namespace: groups built without a name_prefix (as the
    # documentation's colocation example builds two) get one from the class and a counter.
    prefix = state.name_prefix or f"{state.builder.ray_actor_class_fqn.rpartition('.')[2].lower()}{next(unnamed)}"
    state.frac = 1.0 / state.cluster.max_colocated_worker_groups if state.cluster.use_gpus else 0
    plan_workers(state, tied, slots, prefix, named_groups)
    try:
        memory.reserve([(p.placement_group, p.bundle) for p in state.plans])
        state.workers = build_workers(state, state.plans)
        state.tracker = CallTracker(len(state.workers))
        memory.watch(list(range(len(state.workers))))
    except BaseException:
        memory.release()
        state.clear()
        raise


def shut_down(
    state: GroupState,
    restarts: Restarts,
    memory: MemoryLimits,
    cleanup_method: str | None,
    timeout: float,
    force: bool,
) -> bool:
    import ray

    clean = True
    if cleanup_method and not force and state.workers:
        # A dead worker cannot clean up: it makes the shutdown unclean (False) and the others
        # still get their call. Asked of the GCS, which knows of a ray.kill as soon as it
        # returns (a call sent to the process then may still be answered).
        dead = set(restarts.dead_workers())
        if dead:
            logger.warning(
                "RayWorkerGroup.shutdown: worker(s) %s are dead; no %s() for them", sorted(dead), cleanup_method
            )
            clean = False
        try:
            living = [w for w in range(len(state.workers)) if w not in dead]
            ray.get([state.call(w, cleanup_method) for w in living], timeout=timeout)
        except Exception as exc:  # noqa: BLE001 - any failure means: fall back to force
            logger.warning("RayWorkerGroup.shutdown: %s failed (%s); killing the workers", cleanup_method, exc)
            clean = False
    for w in state.workers:
        try:
            ray.kill(w)
        except Exception as exc:  # noqa: BLE001
            logger.warning("RayWorkerGroup.shutdown: could not kill a worker: %s", exc)
            clean = False
    memory.release()
    state.clear()
    return clean
