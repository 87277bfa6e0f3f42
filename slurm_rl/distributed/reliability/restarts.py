"""What a worker group does when workers die or stall: WorkerFailureError on its result paths,
``restart_failed_workers`` (same rank, env and arguments, same bundle; tied workers together;
a new rendezvous and the ``on_group_restart`` hook for everyone), per-worker status, resource
usage and stuck-call detection with a stack. Mixed into RayWorkerGroup."""

from __future__ import annotations

import logging
import os
import time
from typing import Any

from ..worker_env.node_probe import probe_on
from ..api.worker_builder import _actor_of
from .failures import FailedWorker, WorkerFailureError, gather
from .health import CallTracker, actor_info

logger = logging.getLogger(__name__)

RESTART_HOOK = "on_group_restart"
MEMORY_HOLD_TIMEOUT_S = 10.0
EXPLAIN_WAIT_S = 15.0  # within slurm-rl's node health-check window (job/ray_start.py)
RESTART_READY_TIMEOUT_S = 120.0
DEFAULT_STUCK_TIMEOUT_S = 300.0


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


class _MemoryHold:
    """Holds a share of Ray's ``memory`` resource on one node for a group with memory_limit."""


def node_names() -> dict[str, str]:
    """Ray node id -> host name (from Ray's node table: no DNS lookups)."""
    import ray

    return {n["NodeID"]: n.get("NodeManagerHostname") or n["NodeManagerAddress"] for n in ray.nodes()}


class WorkerReliability:
    _workers: list[Any]
    _worker_metadata: list[dict[str, Any]]
    tied_workers_groups: list[list[int]]
    worker_to_tied_group_index: dict[int, int]
    _tracker: CallTracker
    restart_on_failure: bool
    max_restarts: int
    memory_limit_bytes: int | None
    _known_dead: set[int]

    # ---- where workers are ---------------------------------------------------------------------
    def _locate(self, workers: list[int]) -> dict[int, Any]:
        """Fresh GCS facts for these workers; pid and node are remembered (a dead actor's stay)."""
        infos = {}
        for w in workers:
            info = actor_info(_actor_of(self._workers[w]))
            record = self._tracker.records[w]
            record.pid = info.pid or record.pid
            record.node_ip = info.node_ip or record.node_ip
            record.node_id = info.node_id or record.node_id
            infos[w] = info
        return infos

    def _node_label(self, w: int, names: dict[str, str]) -> str:
        record = self._tracker.records[w]
        host = names.get(record.node_id or "", "")
        return f"{host} ({record.node_ip})" if host and host != record.node_ip else str(record.node_ip or "unknown")

    def _explain(self, workers: list[int]) -> list[FailedWorker]:
        import ray

        infos = self._locate(workers)
        # A worker whose node vanished fails its caller at once (the connection drops), before
        # Ray's GCS has declared the node dead: wait for its verdict, which names the cause.
        deadline = time.monotonic() + EXPLAIN_WAIT_S
        while any(i.state != "DEAD" for i in infos.values()) and time.monotonic() < deadline:
            time.sleep(0.25)
            infos = self._locate(workers)
        names = node_names()
        alive_nodes = {n["NodeID"] for n in ray.nodes() if n.get("Alive")}
        out = []
        for w in workers:
            record, info = self._tracker.records[w], infos[w]
            cause = None
            if self.memory_limit_bytes and record.pid and record.node_id in alive_nodes:
                try:  # the memory watchdog on the worker's node says whether it stopped the worker
                    cause = ray.get(probe_on(record.node_id).cause.remote(record.pid), timeout=5)
                except Exception:  # noqa: BLE001 - the node itself may be gone
                    cause = None
            cause = cause or info.death or "the worker's actor died"
            if record.node_id and record.node_id not in alive_nodes:
                cause = f"node lost (Ray declared it dead): {cause}"
            if info.state == "DEAD":
                self._known_dead.add(w)
            out.append(FailedWorker(index=w, rank=self._worker_metadata[w]["global_rank"],
                                    node=self._node_label(w, names), cause=cause))
        return out

    # ---- dispatch ------------------------------------------------------------------------------
    def _before_dispatch(self, workers: list[int]) -> None:
        """A call to a worker already known dead fails now, not as a doomed ref: with
        ``restart_on_failure`` the group restarts it first (logged), else WorkerFailureError."""
        if not self._known_dead:  # the hot path: nothing known dead, nothing to build
            return
        dead = self._known_dead.intersection(workers)
        if not dead:
            return
        if not self.restart_on_failure:
            raise WorkerFailureError(self._explain(sorted(dead)),
                                     note="call restart_failed_workers() before calling these workers again")
        logger.warning("restart_on_failure: worker(s) %s are dead; restarting them before the call", sorted(dead))
        self.restart_failed_workers()

    # ---- results -------------------------------------------------------------------------------
    def get_results(self, refs: Any) -> list[Any]:
        """Block for the results of a ``run_*`` call (a list of refs, in order). A dead worker
        raises WorkerFailureError naming it; with ``restart_on_failure`` the group restarts the
        dead workers and runs the call once more (logged), then gives up."""
        workers = list(getattr(refs, "workers", None) or range(len(refs)))
        try:
            return gather(refs, workers, self._explain)
        except WorkerFailureError as exc:
            call = getattr(refs, "call", None)
            if not self.restart_on_failure or call is None:
                raise
            method, args, kwargs = call
            logger.warning("%s\nrestart_on_failure: restarting the failed workers and running %r again, once",
                           exc, method)
            self.restart_failed_workers()
            again = [self._call(w, method, *args, **kwargs) for w in workers]
            return gather(again, workers, self._explain)

    # ---- restarts ------------------------------------------------------------------------------
    def dead_workers(self) -> list[int]:
        return [w for w, info in self._locate(list(range(len(self._workers)))).items() if info.state == "DEAD"]

    def restart_failed_workers(self) -> list[int]:
        """Recreate every dead worker (and the rest of its tied group) with the same rank, env
        and constructor arguments, in its original bundle (Ray moves a bundle whose node is gone
        to a surviving node when one has room). Then every worker gets the new rendezvous
        (``MASTER_ADDR``/``MASTER_PORT``) and the survivors' ``on_group_restart()`` is called (a restarted worker's
        ``__init__`` already runs with it), both at once. Returns the
        restarted worker indices; raises WorkerFailureError past ``max_restarts``."""
        import ray

        dead = self.dead_workers()
        if not dead:
            return []
        groups = sorted({self.worker_to_tied_group_index[w] for w in dead})
        members = [w for g in groups for w in self.tied_workers_groups[g]]
        worn = [w for w in members if self._tracker.records[w].restarts >= self.max_restarts]
        if worn:
            raise WorkerFailureError(
                self._explain(worn),
                note=f"not restarting: worker(s) {worn} were already restarted max_restarts={self.max_restarts} "
                     f"times (raise max_restarts, or see why they die: slurm-rl logs JOBID)")
        failures = self._explain(dead)
        for w in members:
            self._tracker.records[w].restarting = True
            try:
                ray.kill(_actor_of(self._workers[w]))  # a tied group restarts as a whole
            except Exception:  # noqa: BLE001 - already dead
                pass
        deadline = time.monotonic() + 10  # a killed actor's name is free once the GCS has it dead
        while time.monotonic() < deadline and any(i.state != "DEAD" for i in self._locate(members).values()):
            time.sleep(0.05)
        address, port = self._cluster.get_master_address_and_port()
        self._master_address, self._master_port = address, port
        for plan in self._plans:
            plan[0]["runtime_env"]["env_vars"].update({"MASTER_ADDR": address, "MASTER_PORT": str(port)})
        pgs = {id(self._plans[w][2]): self._plans[w][2] for w in members}
        try:
            ray.get([pg.ready() for pg in pgs.values()], timeout=RESTART_READY_TIMEOUT_S)
        except ray.exceptions.GetTimeoutError:
            raise WorkerFailureError(failures, note=(
                f"cannot restart: the bundles of worker(s) {members} found no node within "
                f"{RESTART_READY_TIMEOUT_S:g} s (their node is gone and no surviving node has room)")) from None
        plans = [self._plans[w] for w in members]
        fresh = self._builder.plan_all([(self._frac, b, o) for o, b, _, _ in plans])
        for w, plan, (_, _, pg, bundle) in zip(members, fresh, plans):
            self._workers[w] = self._builder.create(plan, pg, bundle, self._frac)
        # The restarted workers' __init__ may join the new rendezvous (and wait there for the
        # others): the survivors' hooks run at the same time, never after.
        ready = [_actor_of(self._workers[w]).__ray_ready__.remote() for w in members]
        survivors = [w for w in range(len(self._workers)) if w not in members]
        hooks = [_actor_of(self._workers[w]).__ray_call__.remote(_rejoin, address, port) for w in survivors]
        try:
            ray.get(ready + hooks, timeout=RESTART_READY_TIMEOUT_S)
        except ray.exceptions.GetTimeoutError:
            raise WorkerFailureError(failures, note=(
                f"restart of worker(s) {members} did not finish within {RESTART_READY_TIMEOUT_S:g} s (their __init__ "
                f"or the others' {RESTART_HOOK}() hangs; see detect_stuck_workers())")) from None
        self._known_dead.difference_update(members)
        for w in members:
            record = self._tracker.records[w]
            record.restarts += 1
            record.restarting = False
            record.pid = record.node_id = record.node_ip = None
            self._tracker.reset(w)
        self._watch_memory(members)
        logger.warning("restarted worker(s) %s after: %s; new rendezvous %s:%d, %s() called on the others",
                       members, "; ".join(str(f) for f in failures), address, port, RESTART_HOOK)
        return members

    # ---- memory limits -------------------------------------------------------------------------
    def _reserve_memory(self, bundles: list[tuple[Any, int]]) -> None:
        """Take ``memory_limit`` x (workers on the node) of Ray's ``memory`` resource on each node
        of the group, held by one zero-CPU actor per node for the group's life: scheduling
        elsewhere sees it gone. Fails fast, naming the node, when the node has not that much."""
        import ray
        from ray.util.placement_group import placement_group_table
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        self._memory_holds: list[Any] = []
        if not self.memory_limit_bytes:
            return
        per_node: dict[str, int] = {}
        for pg, bundle in bundles:
            node = placement_group_table(pg)["bundles_to_node_id"][bundle]
            per_node[node] = per_node.get(node, 0) + 1
        names = node_names()
        totals = {n["NodeID"]: n["Resources"].get("memory", 0) for n in ray.nodes()}
        for node, count in per_node.items():
            want = count * self.memory_limit_bytes
            if want <= totals.get(node, 0):
                hold = ray.remote(_MemoryHold).options(
                    num_cpus=0, memory=want,
                    scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=node, soft=False)).remote()
                self._memory_holds.append(hold)
                try:
                    ray.get(hold.__ray_ready__.remote(), timeout=MEMORY_HOLD_TIMEOUT_S)
                    continue
                except ray.exceptions.GetTimeoutError:
                    pass
            self._release_memory()
            raise ValueError(
                f"memory_limit: {count} worker(s) x {self.memory_limit_bytes / 2**30:.2f} GiB do not fit in the "
                f"memory Ray has free on node {names.get(node, node)} (its total for Ray: "
                f"{totals.get(node, 0) / 2**30:.2f} GiB); lower memory_limit or spread the workers")

    def _release_memory(self) -> None:
        import ray

        for hold in getattr(self, "_memory_holds", []):
            try:
                ray.kill(hold)
            except Exception:  # noqa: BLE001 - already gone
                pass
        self._memory_holds = []

    def _watch_memory(self, workers: list[int]) -> None:
        import ray

        if not self.memory_limit_bytes:
            return
        self._locate(workers)
        asks = []
        for w in workers:
            record = self._tracker.records[w]
            if record.pid and record.node_id:
                label = f"worker {w} ({self._worker_metadata[w]['name']})"
                asks.append(probe_on(record.node_id).watch.remote(record.pid, self.memory_limit_bytes, label))
        ray.get(asks)

    # ---- health --------------------------------------------------------------------------------
    def get_worker_status(self) -> list[dict[str, Any]]:
        """Per worker: state (alive, dead, restarting, pending), node, pid, restarts, the current
        call and how long it has run. Asks Ray's GCS, never the worker: a stuck worker answers."""
        self._tracker.prune()
        infos = self._locate(list(range(len(self._workers))))
        names = node_names()
        out = []
        for w, info in infos.items():
            record = self._tracker.records[w]
            state = ("restarting" if record.restarting else "alive" if info.state == "ALIVE"
                     else "dead" if info.state == "DEAD" else "pending")
            current = self._tracker.current(w) if state == "alive" else None
            out.append({"worker": w, "name": self._worker_metadata[w]["name"], "state": state,
                        "node": self._node_label(w, names), "pid": record.pid, "restarts": record.restarts,
                        "current_call": current[0] if current else None,
                        "running_s": round(current[1], 2) if current else None})
        return out

    def get_resource_usage(self) -> list[dict[str, Any]]:
        """Per worker: CPU %, resident memory and GPU memory (NVML, where a GPU and nvidia-ml-py
        are present), read on the worker's node."""
        import ray

        self._locate(list(range(len(self._workers))))
        names = node_names()
        by_node: dict[str, list[int]] = {}
        for w, record in enumerate(self._tracker.records):
            if record.pid and record.node_id:
                by_node.setdefault(record.node_id, []).append(w)
        readings: dict[int, dict[str, Any]] = {}
        asks = {node: probe_on(node).usage.remote([self._tracker.records[w].pid for w in ws])
                for node, ws in by_node.items()}
        for node, ref in asks.items():
            try:
                per_pid = ray.get(ref, timeout=30)
            except Exception:  # noqa: BLE001 - a lost node has no readings
                per_pid = {}
            for w in by_node[node]:
                readings[w] = per_pid.get(self._tracker.records[w].pid, {})
        return [{"worker": w, "node": self._node_label(w, names), "pid": self._tracker.records[w].pid,
                 "cpu_percent": readings.get(w, {}).get("cpu_percent"),
                 "rss_bytes": readings.get(w, {}).get("rss_bytes"),
                 "gpu_memory_bytes": readings.get(w, {}).get("gpu_memory_bytes")}
                for w in range(len(self._workers))]

    def detect_stuck_workers(self, timeout_s: float = DEFAULT_STUCK_TIMEOUT_S) -> list[dict[str, Any]]:
        """Workers whose current call has run longer than ``timeout_s``, each with the Python
        stack of every thread of its process (py-spy dump, run on its node)."""
        import ray

        stuck = [s for s in self.get_worker_status()
                 if s["state"] == "alive" and s["running_s"] is not None and s["running_s"] > timeout_s]
        stacks = {s["worker"]: probe_on(self._tracker.records[s["worker"]].node_id).stack.remote(s["pid"])
                  for s in stuck}
        for s in stuck:
            try:
                s["stack"] = ray.get(stacks[s["worker"]], timeout=60)
            except Exception as exc:  # noqa: BLE001
                s["stack"] = f"stack unavailable: {exc}"
        return stuck

    def print_worker_status(self) -> None:
        from .tables import print_table

        print_table("worker status", self.get_worker_status())

    def print_resource_usage(self) -> None:
        from .tables import print_table

        print_table("resource usage", self.get_resource_usage())
