"""What one node's bootstrap knows and does for both roles: who it is in the job (from SLURM's
step variables and the job manifest), its log and events, bounded waits, and `ray start`.

Kept light on imports: ray is imported only where `ray start` runs.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from ..core.causes import Cause
from ..core.errors import SlurmRlError
from ..core.events import append_event, read_json
from ..core.job_env import MEMBER_RANK_BASE, JobEnvironment
from ..core.job_ids import is_array_task, job_number
from ..core.manifest import JobManifest
from ..core.parts import PART_RESOURCE_PREFIX, place
from ..core.paths import JobPaths, ray_temp_dir
from ..core.ports import PortsBusy, RayPorts, choose_ports
from ..core.service_states import write_job_dir_pointer
from .board import Board
from .memory import MemoryLimit, node_memory_limit
from .network import AddressProblem, NodeAddress, choose_address, ipv4_addresses
from .node_topology import topology_resources
from .spawn_gate import SpawnGate

POLL_S = 0.05


class NodeFailure(SlurmRlError):
    """This node cannot go on; the message names what failed and where to look."""


class Stopped(SlurmRlError):
    """The job is being stopped from outside (signal) or by node 0; not this node's fault."""


def port_number(job_id: str) -> int:
    """What spreads the job's preferred GCS port: SLURM's own id of this allocation, unique among
    the jobs a node runs (a sweep's task 1234_5 has one of its own, next to its neighbours'),
    else a number made from the job id (a local run)."""
    own = JobEnvironment.current().job_id or ""
    return int(own) if own.isdigit() else job_number(job_id)


@dataclass
class NodeContext:
    """One node of one attempt of a job. Built by ``from_environ``; roles read and log through it."""

    job_id: str
    rank: int
    node: str
    nodes: list[str]
    cpus: int
    gpus: int
    attempt: int
    paths: JobPaths
    manifest: JobManifest
    log: IO[str]
    part: str = ""  # a job of parts: this task's part (core/parts.py)
    stop_requested: threading.Event = field(default_factory=threading.Event)
    ready: threading.Event = field(default_factory=threading.Event)  # node 0: the nodes the job needs are up
    stop_reason: str = ""
    driver: subprocess.Popen[bytes] | None = None
    failure: str | None = None  # another node failed (seen by node 0): the job's exit reason
    failure_cause: Cause | None = None  # ... and its cause (core/causes.py)
    signalled: bool = False  # a signal (scancel, time limit, preemption) stopped this node
    memory_limit: MemoryLimit | None = None  # what SLURM gave the job here (Ray's sizes, OOM reports)
    board: Board | None = None  # the job's signals in the head's GCS, once this node's Ray is up
    service_urls: dict[str, str] = field(default_factory=dict)  # node 0 of a job of parts: each service's URL
    spawns: SpawnGate = field(default_factory=lambda: SpawnGate(Stopped))  # the role thread's starts; cleanup closes it
    _ports: RayPorts | None = None
    _address: NodeAddress | None = None

    def fail(self, reason: str, cause: Cause | None = None) -> None:
        """Fail the job from here for a reason found elsewhere (a node that failed or never joined)."""
        self.say(f"FAILING THE JOB: {reason}")
        self.failure = self.stop_reason = reason
        self.failure_cause = cause
        self.stop_requested.set()
        if self.driver is not None and self.driver.poll() is None:
            self.driver.terminate()

    @classmethod
    def from_environ(cls, environ: dict[str, str], paths: JobPaths, manifest: JobManifest, log: IO[str]) -> NodeContext:
        env = JobEnvironment.current(environ)
        node = env.node
        nodes, rank = env.nodes_and_rank()
        part = ""
        if manifest.parts and not env.member:  # the step's task rank: its component, its part
            rank = env.task_rank
            part, nodes = place(manifest.parts, rank, env.component_nodes() or [nodes])  # one part: no hetjob
        if env.member:  # a member job's node (--heal): a worker of the job it joins, after its nodes
            nodes = list((read_json(paths.cluster) or {}).get("nodes") or nodes)
            rank = MEMBER_RANK_BASE * env.member + env.node_rank
        head_only = rank == 0 and manifest.head_node == "cpu"  # the driver's node: no Ray work there
        return cls(
            job_id=paths.job_id,  # the job dir's id: a hetjob component's own SLURM_JOB_ID differs
            rank=rank,
            node=node,
            nodes=nodes,
            part=part,
            cpus=0 if head_only else env.cpus_on_node,
            gpus=0 if head_only else env.gpu_count(),
            # SLURM counts requeues; every marker file is per attempt: a requeued job starts fresh
            attempt=env.attempt,
            paths=paths,
            manifest=manifest,
            log=log,
            memory_limit=node_memory_limit(environ),
        )

    @property
    def ports(self) -> RayPorts:
        """This node's ports, chosen once (free right now; see core/ports.py)."""
        if self._ports is None:
            try:
                head, client = self.rank == 0, self.manifest.ray_client
                self._ports = choose_ports(port_number(self.job_id), self.manifest.port_base, head, client)
            except PortsBusy as exc:
                raise NodeFailure(f"{exc} ({self.node})") from None
        return self._ports

    @property
    def is_service(self) -> bool:
        """A service part's task (no Ray node of its own)."""
        return bool(self.part) and self.manifest.parts[self.part].is_service

    @property
    def temp_dir(self) -> str:
        return self.manifest.temp_dir(self.job_id)

    @property
    def ray_session_logs(self) -> Path:
        """Ray's logs of this node's current session (copied to the job dir at the end)."""
        return Path(ray_temp_dir(self.temp_dir)) / "session_latest" / "logs"

    @property
    def stop_flag(self):
        return self.paths.stop_flag_for(self.attempt)

    def say(self, msg: str) -> None:
        line = f"[{time.strftime('%H:%M:%S')} {self.node} rank {self.rank}] {msg}\n"
        try:
            self.log.write(line)
        except RuntimeError:  # a signal's line while this file was being written ("reentrant call")
            os.write(self.log.fileno(), line.encode())  # past the buffer, which the interrupted write holds

    def event(self, name: str, **fields: object) -> None:
        append_event(self.paths.events, name, node=self.node, rank=self.rank, attempt=self.attempt, **fields)

    def wait_until(self, condition: Callable[[], bool], deadline_s: float, what: str) -> None:
        end = time.monotonic() + deadline_s
        while True:
            if self.stop_requested.is_set():
                raise Stopped(f"stopped while waiting for {what}: {self.stop_reason}")
            if condition():
                return
            if time.monotonic() > end:
                raise NodeFailure(f"timed out after {deadline_s:g} s waiting for {what}")
            time.sleep(POLL_S)

    @property
    def address(self) -> NodeAddress:
        """The address this node gives Ray (spec field network_interface, else its name's), once."""
        if self._address is None:
            try:
                self._address = choose_address(
                    self.node, self.manifest.network_interface, ipv4_addresses(), nodes=len(self.nodes)
                )
            except AddressProblem as exc:
                raise NodeFailure(str(exc)) from None
        return self._address

    @property
    def ip(self) -> str:
        return self.address.ip

    def ray_start(self, extra: list[str], retry: bool = False) -> None:
        """`ray start` in this process, its daemons our children (we are their subreaper). With
        ``retry``, once more after a start whose raylet gave up waiting for its agents (not when
        a stop came meanwhile): nothing has joined this node yet (the others join a head only
        once it says it is up)."""
        import psutil

        from ..core.procs import stop_processes
        from .memory import ray_memory
        from .ray_start import agents_were_late, raylet_fatal, start_in_process

        resources = {
            "slurm_managed_ray_cluster": 1,
            f"slurm_job_{self.job_id}": 1,
            **self.manifest.type_resources(self.node, self.gpus),
            **({f"{PART_RESOURCE_PREFIX}{self.part}": 1} if self.part else {}),  # RayVirtualCluster(part=...)
        }
        env = JobEnvironment.current()
        # a sweep's task (1234_5) is also SLURM job <own id> (a member job's own id is not the task's)
        if env.job_id and is_array_task(self.job_id) and not env.member:
            resources[f"slurm_job_{env.job_id}"] = 1
        topology, note = topology_resources(env.leaf_switch(), self.rank, env.topology_addr)
        resources.update(topology)
        self.say(note)
        budget, warning = ray_memory(
            self.memory_limit, psutil.virtual_memory().available, shutil.disk_usage("/dev/shm").free
        )
        self.say(budget.note)
        if warning:
            self.say(f"warning: {warning}")
            self.event("node_warning", warning=warning)
        write_job_dir_pointer(self.temp_dir, self.paths.job_dir)  # slurm_rl.services() in a worker
        argv = [
            f"--node-ip-address={self.ip}",
            *([f"--memory={budget.memory}"] if budget.memory is not None else []),
            f"--object-store-memory={budget.object_store}",
            f"--num-cpus={self.cpus}",
            f"--num-gpus={self.gpus}",
            f"--resources={json.dumps(resources)}",
            f"--temp-dir={ray_temp_dir(self.temp_dir)}",
            "--disable-usage-stats",
            *self.ports.ray_start_args(),
            *extra,
        ]
        for attempt in (1, 2):
            self.say("ray start " + " ".join(argv))
            try:
                start_in_process(argv, dashboard=self.manifest.wants_dashboard, spawns=self.spawns)  # each spawn gated
                return
            except Stopped:  # cleanup began before this start: not a failure of Ray's
                raise
            except (Exception, SystemExit) as exc:  # click raises SystemExit on bad arguments
                if self.spawns.closed:  # cleanup began mid-start and stopped what it had spawned
                    raise Stopped("`ray start` cut short: the node is cleaning up") from exc
                why = raylet_fatal(self.ray_session_logs)
                failure = f"`ray start` failed: {exc!r}" + (f"; its raylet: {why}" if why else "")
            if attempt == 2 or not retry or not agents_were_late(why) or self.stop_requested.is_set():
                raise NodeFailure(failure)
            stopped = stop_processes(psutil.Process().children(recursive=True), grace_s=0.5)
            self.say(failure)
            self.say(
                f"the raylet's fixed wait for its agents ran out (an overloaded node): stopped this "
                f"attempt's {len(stopped)} processes; starting Ray once more"
            )
            self.event("ray_start_retried", why=why)

    def ray_node_cost(self) -> dict[str, object]:
        """What this node's Ray costs: CPU seconds spent starting it (this process and the
        daemons it started), their resident memory (RSS, which counts Ray's shared library once
        per process) and their proportional share of it (PSS: what the node's RAM really holds),
        and the same per process. What extrapolates to real clusters."""
        import psutil

        me = psutil.Process()
        total = {"ray_cpu_s": 0.0, "ray_rss_mb": 0.0, "ray_pss_mb": 0.0}
        per_process: dict[str, list[float]] = {}
        for p in [me, *me.children(recursive=True)]:
            try:
                name = "bootstrap" if p.pid == me.pid else process_role(p.cmdline(), p.name())
                if name == "worker":  # a Ray worker the job's tasks use: the job's cost, not Ray's
                    continue
                t = p.cpu_times()
                mem = p.memory_full_info()
            except psutil.Error:
                continue
            cpu, rss, pss = t.user + t.system, mem.rss / 2**20, getattr(mem, "pss", mem.rss) / 2**20
            total["ray_cpu_s"] += cpu
            total["ray_rss_mb"] += rss
            total["ray_pss_mb"] += pss
            per_process[f"{name}[{p.pid}]"] = [round(cpu, 2), round(rss, 1), round(pss, 1)]
        return {**{k: round(v, 2 if k == "ray_cpu_s" else 1) for k, v in total.items()}, "ray_processes": per_process}


def process_role(cmdline: list[str], name: str) -> str:
    """Which of Ray's node processes this is (log_monitor, dashboard, ...), or "worker"."""
    for arg in cmdline[:4]:
        base = arg.rsplit("/", 1)[-1]
        if base.endswith(".py"):
            return "worker" if base == "default_worker.py" else base[:-3]
    return name.removeprefix("ray::")


def describe_error(exc: BaseException) -> str:
    """An exception in one line; an OSError names its path (``FileNotFoundError: ... '/tmp/x'``)."""
    if isinstance(exc, OSError) and exc.filename:
        return f"{type(exc).__name__}: {exc.strerror}: {exc.filename!r} does not exist or is not usable on this node"
    return repr(exc)
