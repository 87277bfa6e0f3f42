"""Workers come to be: each plan's node initializer (started on first use, replaced when its
node died or Ray moved the bundle) creates the worker; ``build_workers`` waits until every one
is up or removes them all and raises ``WorkerBuildError`` naming the worker, its node and the
remote traceback; ``create_workers`` is a restart's form (no wait for ``__init__``)."""

from __future__ import annotations

from typing import Any

from .errors import WorkerBuildError, WorkerBuildValueError, build_error, explain_cause  # noqa: F401
from .group_state import GroupState, WorkerPlan
from .initializer import alive, bundle_node_id, is_local


def _bundle_node(pg: Any, bundle: int) -> str:
    """``node <ip>`` hosting a placement-group bundle (best effort, for error messages)."""
    try:
        import ray
        from ray.util.placement_group import placement_group_table

        node_id = placement_group_table(pg)["bundles_to_node_id"][bundle]
        ip = next(n["NodeManagerAddress"] for n in ray.nodes() if n["NodeID"] == node_id)
        return f"node {ip}"
    except Exception:  # noqa: BLE001 - a message detail only
        return "an unknown node"


def _initializer(state: GroupState, plan: WorkerPlan, py: str, check: bool) -> Any:
    """The pool's initializer for the plan's node, started on first use. With ``check`` (a
    restart), a dead one (its node died, and the workers it owned with it) or one on another
    node than the bundle now (Ray moved the bundle) is replaced; the old handle is kept until
    the group ends (dropping it would let Ray reap it with any worker it still owns)."""
    pool = state.initializer_pool
    current = pool.get(plan.node)
    if check and current is not None and not is_local(current):
        moved = getattr(current, "_slurm_rl_node_id", None) != bundle_node_id(plan.placement_group, plan.bundle)
        if moved or not alive(current):
            state.retired_initializers.append(current)
            current = None
    if current is None:
        current = state.builder.initializer(py, plan.placement_group, plan.bundle)
        if not is_local(current):
            current._slurm_rl_node_id = bundle_node_id(plan.placement_group, plan.bundle)
        pool[plan.node] = current
    return current


def start_workers(state: GroupState, plans: list[WorkerPlan], check: bool = False) -> list[Any]:
    """Ask each plan's initializer for its worker: an actor handle (driver's Python) or an
    ObjectRef of one (an initializer actor; they all start at once). Raises what a local
    initializer raised (the index is the next item's)."""
    builder = state.builder
    num_gpus_per_node = state.cluster.num_gpus_per_node
    started: list[Any] = []
    for p in plans:
        py = builder.python_for(p.options)
        initializer = _initializer(state, p, py, check)
        args = (p.placement_group, p.bundle, state.frac, p.bundle_indices)
        options = builder.worker_options(p.options, py)
        if is_local(initializer):
            started.append(initializer.create_worker(*args, num_gpus_per_node=num_gpus_per_node, **options))
        else:
            started.append(initializer.create_worker.remote(*args, num_gpus_per_node=num_gpus_per_node, **options))
    return started


def _resolve(started: Any) -> Any:
    import ray

    return ray.get(started) if isinstance(started, ray.ObjectRef) else started


def create_workers(state: GroupState, plans: list[WorkerPlan]) -> list[Any]:
    """Create the planned workers again (a restart: initializers checked, in parallel) without
    waiting for their ``__init__``."""
    return [_resolve(s) for s in start_workers(state, plans, check=True)]


def visible_gpus(_worker: Any) -> list[Any]:
    """Runs inside a worker (``__ray_call__``): the GPUs Ray gave it, as ``ray.get_gpu_ids()``
    names them (what its ``CUDA_VISIBLE_DEVICES`` lists unless the worker opted out of that)."""
    import ray

    return list(ray.get_gpu_ids())


def build_workers(state: GroupState, plans: list[WorkerPlan]) -> list[Any]:
    """Create every worker and wait until each is up; on any failure kill what was created and
    raise WorkerBuildError for the first worker that failed."""
    import ray

    created: list[Any] = []
    current = 0
    try:
        state.builder.prepare([p.placement_group for p in plans])
        started: list[Any] = []
        for p in plans:  # one by one, so that a failure names its worker
            current = len(started)
            started += start_workers(state, [p])
        for index, s in enumerate(started):
            current = index
            created.append(_resolve(s))
        ready = [w.__ray_call__.remote(visible_gpus) for w in created]  # up once __init__ returned
        state.gpu_ids = []
        for index, ref in enumerate(ready):
            current = index
            state.gpu_ids.append(ray.get(ref))
        return created
    except Exception as exc:
        for w in created:
            try:
                ray.kill(w)
            except Exception:  # noqa: BLE001 - best effort while reporting the real error
                pass
        plan = plans[current]
        raise build_error(current, plan.name, _bundle_node(plan.placement_group, plan.bundle), exc) from exc
