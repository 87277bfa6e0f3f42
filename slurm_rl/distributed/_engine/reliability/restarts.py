"""What a worker group does when workers die: WorkerFailureError on its result paths (naming
each dead worker's node and cause), and ``restart_failed_workers`` (same rank, env and
arguments, same bundle; tied workers together; a new rendezvous and the ``on_group_restart``
hook for everyone). One ``Restarts`` per group, over the group's ``GroupState``."""

from __future__ import annotations

import logging
import os
import time
from typing import Any

from ...worker_env.node_probe import probe_on
from ..group_state import GroupState
from ..launch import create_workers, visible_gpus
from .failures import FailedWorker, WorkerFailureError, gather
from .health import locate, node_label, node_names
from .memory_limits import MemoryLimits

logger = logging.getLogger(__name__)

RESTART_HOOK = "on_group_restart"
EXPLAIN_WAIT_S = 15.0  # within slurm-rl's node health-check window (job/ray_start.py)
RESTART_READY_TIMEOUT_S = 120.0


def _rejoin(actor_self: Any, master_address: str, master_port: int) -> bool:
    """Runs inside a worker (``__ray_call__``): point it at the new rendezvous, then call its
    ``on_group_restart()`` if it has one. Returns whether it had one."""
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = master_address, str(master_port)
    target = getattr(actor_self, "_obj", actor_self)  # an isolated worker's object lives in _obj
    hook = getattr(target, RESTART_HOOK, None)
    if hook is None:
        return False
    hook()
    return True


class Restarts:
    """Failure explanations, the dead-worker guard before dispatch, results with a retry, restarts."""

    def __init__(self, state: GroupState, memory: MemoryLimits) -> None:
        self.state, self.memory = state, memory

    def explain(self, workers: list[int]) -> list[FailedWorker]:
        import ray

        infos = locate(self.state, workers)
        # A worker whose node vanished fails its caller at once (the connection drops), before
        # Ray's GCS has declared the node dead: wait for its verdict, which names the cause.
        deadline = time.monotonic() + EXPLAIN_WAIT_S
        while any(i.state != "DEAD" for i in infos.values()) and time.monotonic() < deadline:
            time.sleep(0.25)
            infos = locate(self.state, workers)
        names = node_names()
        alive_nodes = {n["NodeID"] for n in ray.nodes() if n.get("Alive")}
        out = []
        for w in workers:
            record, info = self.state.tracker.records[w], infos[w]
            cause: str | None = None
            if (
                self.state.settings.memory_limit_bytes
                and record.pid
                and record.node_id
                and record.node_id in alive_nodes
            ):
                try:  # the memory watchdog on the worker's node says whether it stopped the worker
                    cause = str(ray.get(probe_on(record.node_id).cause.remote(record.pid), timeout=5) or "") or None
                except Exception:  # noqa: BLE001 - the node itself may be gone
                    cause = None
            cause = cause or info.death or "the worker's actor died"
            if record.node_id and record.node_id not in alive_nodes:
                cause = f"node lost (Ray declared it dead): {cause}"
            if info.state == "DEAD":
                self.state.known_dead.add(w)
            out.append(
                FailedWorker(
                    index=w,
                    rank=self.state.metadata[w]["global_rank"],
                    node=node_label(self.state, w, names),
                    cause=cause,
                )
            )
        return out

    # ---- dispatch ------------------------------------------------------------------------------
    def before_dispatch(self, workers: list[int]) -> None:
        """A call to a worker already known dead fails now, not as a doomed ref: with
        ``restart_on_failure`` the group restarts it first (logged), else WorkerFailureError."""
        if not self.state.known_dead:  # the hot path: nothing known dead, nothing to build
            return
        dead = self.state.known_dead.intersection(workers)
        if not dead:
            return
        if not self.state.settings.restart_on_failure:
            raise WorkerFailureError(
                self.explain(sorted(dead)), note="call restart_failed_workers() before calling these workers again"
            )
        logger.warning("restart_on_failure: worker(s) %s are dead; restarting them before the call", sorted(dead))
        self.restart_failed_workers()

    # ---- results -------------------------------------------------------------------------------
    def get_results(self, refs: Any) -> list[Any]:
        """Block for the results of a ``run_*`` call (a list of refs, in order). A dead worker
        raises WorkerFailureError naming it; with ``restart_on_failure`` the group restarts the
        dead workers and runs the call once more (logged), then gives up."""
        workers = list(getattr(refs, "workers", None) or range(len(refs)))
        try:
            return gather(refs, workers, self.explain)
        except WorkerFailureError as exc:
            call = getattr(refs, "call", None)
            if not self.state.settings.restart_on_failure or call is None:
                raise
            method, args, kwargs = call
            logger.warning(
                "%s\nrestart_on_failure: restarting the failed workers and running %r again, once", exc, method
            )
            self.restart_failed_workers()
            again = [self.state.call(w, method, *args, **kwargs) for w in workers]
            return gather(again, workers, self.explain)

    # ---- restarts ------------------------------------------------------------------------------
    def dead_workers(self) -> list[int]:
        return [
            w for w, info in locate(self.state, list(range(len(self.state.workers)))).items() if info.state == "DEAD"
        ]

    def restart_failed_workers(self) -> list[int]:
        """Recreate every dead worker (and the rest of its tied group) with the same rank, env
        and constructor arguments, in its original bundle (Ray moves a bundle whose node is gone
        to a surviving node when one has room). Then every worker gets the new rendezvous
        (``MASTER_ADDR``/``MASTER_PORT``) and the survivors' ``on_group_restart()`` is called (a restarted worker's
        ``__init__`` already runs with it), both at once. Returns the
        restarted worker indices; raises WorkerFailureError past ``max_restarts``."""
        import ray

        started = time.monotonic()
        dead = self.dead_workers()
        if not dead:
            return []
        groups = sorted({self.state.worker_to_tied_group_index[w] for w in dead})
        members = [w for g in groups for w in self.state.tied_workers_groups[g]]
        worn = [w for w in members if self.state.tracker.records[w].restarts >= self.state.settings.max_restarts]
        if worn:
            raise WorkerFailureError(
                self.explain(worn),
                note=f"not restarting: worker(s) {worn} were already restarted "
                f"max_restarts={self.state.settings.max_restarts} "
                f"times (raise max_restarts, or see why they die: slurm-rl logs JOBID)",
            )
        failures = self.explain(dead)
        for w in members:
            self.state.tracker.records[w].restarting = True
            try:
                ray.kill(self.state.workers[w])  # a tied group restarts as a whole
            except Exception:  # noqa: BLE001 - already dead
                pass
        deadline = time.monotonic() + 10  # a killed actor's name is free once the GCS has it dead
        while time.monotonic() < deadline and any(i.state != "DEAD" for i in locate(self.state, members).values()):
            time.sleep(0.05)
        address, port = self.state.cluster.get_master_address_and_port()
        self.state.master_address, self.state.master_port = address, port
        for plan in self.state.plans:
            plan.env_vars.update({"MASTER_ADDR": address, "MASTER_PORT": str(port)})
        pgs = {id(self.state.plans[w].placement_group): self.state.plans[w].placement_group for w in members}
        wait_s = placement_wait_s()
        try:
            ray.get([pg.ready() for pg in pgs.values()], timeout=wait_s)
        except ray.exceptions.GetTimeoutError:
            raise WorkerFailureError(
                failures,
                note=(
                    f"cannot restart: the bundles of worker(s) {members} found no node within "
                    f"{wait_s:g} s (their node is gone and no surviving node has room)"
                ),
            ) from None
        fresh = create_workers(self.state, [self.state.plans[w] for w in members])
        for w, worker in zip(members, fresh):
            self.state.workers[w] = worker
        # The restarted workers' __init__ may join the new rendezvous (and wait there for the
        # others): the survivors' hooks run at the same time, never after.
        ready = [self.state.workers[w].__ray_call__.remote(visible_gpus) for w in members]
        survivors = [w for w in range(len(self.state.workers)) if w not in members]
        hooks = [self.state.workers[w].__ray_call__.remote(_rejoin, address, port) for w in survivors]
        try:
            gpus = ray.get(ready + hooks, timeout=RESTART_READY_TIMEOUT_S)[: len(members)]  # members' order
        except ray.exceptions.GetTimeoutError:
            raise WorkerFailureError(
                failures,
                note=(
                    f"restart of worker(s) {members} did not finish within {RESTART_READY_TIMEOUT_S:g} s "
                    f"(their __init__ "
                    f"or the others' {RESTART_HOOK}() hangs; see detect_stuck_workers())"
                ),
            ) from None
        self.state.known_dead.difference_update(members)
        for w, gpu_ids in zip(members, gpus):
            record = self.state.tracker.records[w]
            record.restarts += 1
            record.restarting = False
            self.state.gpu_ids[w] = gpu_ids
            record.pid = record.node_id = record.node_ip = None
            self.state.tracker.reset(w)
        self.memory.watch(members)
        logger.warning(
            "restarted worker(s) %s after: %s; new rendezvous %s:%d, %s() called on the others",
            members,
            "; ".join(str(f) for f in failures),
            address,
            port,
            RESTART_HOOK,
        )
        record_restored(self.state.name_prefix, members, [f.node for f in failures], time.monotonic() - started)
        return members


def placement_wait_s() -> float:
    """How long a restart waits for its lost bundles to find a node: in a healing job (--heal),
    as long as the job waits for a replacement node, else RESTART_READY_TIMEOUT_S."""
    from ....core.errors import JobError
    from ....core.job_env import JobEnvironment
    from ....core.manifest import load_manifest
    from ....core.paths import JobPaths

    job_dir = JobEnvironment.current().job_dir
    try:
        manifest = load_manifest(JobPaths(job_dir).manifest) if job_dir is not None else None
    except JobError:
        manifest = None
    if manifest is None or not manifest.heal:
        return RESTART_READY_TIMEOUT_S
    return max(RESTART_READY_TIMEOUT_S, manifest.heal_timeout_s + 30.0)


def record_restored(group: str, workers: list[int], lost_on: list[str], seconds: float) -> None:
    """In a slurm-rl job, the restart is an event of the job (``workers_restored``): `status`
    and a healing job's history show it beside the node's loss and replacement."""
    from ....core.events import append_event
    from ....core.job_env import JobEnvironment
    from ....core.paths import JobPaths

    job_dir = JobEnvironment.current().job_dir
    if job_dir is not None:
        try:
            append_event(
                JobPaths(job_dir).events,
                "workers_restored",
                group=group,
                workers=workers,
                lost_on=lost_on,
                seconds=round(seconds, 1),
            )
        except OSError:
            pass
