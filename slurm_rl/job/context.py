"""What one node's bootstrap knows and does for both roles: who it is in the job (from SLURM's
step variables and the job manifest), its log and events, bounded waits, and `ray start`.

Kept light on imports: ray is imported only where `ray start` runs.
"""

from __future__ import annotations

import json
import socket
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import IO

from ..core.events import append_event
from ..core.manifest import JobManifest
from ..core.nodelist import expand_hostlist
from ..core.paths import JobPaths, node_temp_dir
from ..core.ports import RayPorts, ports_for

POLL_S = 0.05


class NodeFailure(Exception):
    """This node cannot go on; the message names what failed and where to look."""


class Stopped(Exception):
    """The job is being stopped from outside (signal) or by node 0; not this node's fault."""


def gpu_count(environ: dict[str, str]) -> int:
    visible = environ.get("CUDA_VISIBLE_DEVICES", "")
    if visible and visible != "NoDevFiles":
        return len([d for d in visible.split(",") if d.strip()])
    try:
        return int(environ.get("SLURM_GPUS_ON_NODE", "0"))
    except ValueError:
        return 0


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
    stop_requested: threading.Event = field(default_factory=threading.Event)
    stop_reason: str = ""
    driver: subprocess.Popen[bytes] | None = None

    @classmethod
    def from_environ(cls, environ: dict[str, str], paths: JobPaths, manifest: JobManifest,
                     log: IO[str]) -> NodeContext:
        node = environ.get("SLURMD_NODENAME") or socket.gethostname()
        return cls(job_id=environ["SLURM_JOB_ID"], rank=int(environ.get("SLURM_NODEID", "0")), node=node,
                   nodes=expand_hostlist(environ.get("SLURM_JOB_NODELIST", node)),
                   cpus=int(environ.get("SLURM_CPUS_ON_NODE", "1")), gpus=gpu_count(environ),
                   # SLURM counts requeues; every marker file is per attempt: a requeued job starts fresh
                   attempt=int(environ.get("SLURM_RESTART_COUNT", "0") or 0),
                   paths=paths, manifest=manifest, log=log)

    @property
    def ports(self) -> RayPorts:
        return ports_for(int(self.job_id), self.manifest.port_base)

    @property
    def temp_dir(self) -> str:
        return node_temp_dir(self.job_id)

    @property
    def stop_flag(self):  # type: ignore[no-untyped-def]
        return self.paths.stop_flag_for(self.attempt)

    def say(self, msg: str) -> None:
        self.log.write(f"[{time.strftime('%H:%M:%S')} {self.node} rank {self.rank}] {msg}\n")

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

    def node_ip(self, name: str) -> str:
        try:
            return socket.gethostbyname(name)
        except OSError as exc:
            raise NodeFailure(f"cannot resolve node name {name!r} ({exc}); add it to DNS or /etc/hosts") from None

    def ray_start(self, extra: list[str]) -> None:
        """`ray start` in this process, its daemons our children (we are their subreaper)."""
        from .ray_start import start_in_process

        resources = {"slurm_managed_ray_cluster": 1, f"slurm_job_{self.job_id}": 1}
        argv = [f"--node-ip-address={self.node_ip(self.node)}", f"--num-cpus={self.cpus}",
                f"--num-gpus={self.gpus}", f"--resources={json.dumps(resources)}",
                f"--temp-dir={self.temp_dir}", "--disable-usage-stats", *self.ports.ray_start_args(), *extra]
        self.say("ray start " + " ".join(argv))
        try:
            start_in_process(argv)
        except BaseException as exc:  # click raises SystemExit on bad arguments
            raise NodeFailure(f"`ray start` failed: {exc!r}") from None


def port_open(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.2):
            return True
    except OSError:
        return False
