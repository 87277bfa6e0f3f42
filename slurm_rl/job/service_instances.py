"""A service part's instances on this node (a job of parts, core/parts.py): each started on a
free port with its share of the task's GPUs and a log of its own, checked for readiness (TCP or
an HTTP path), started again when it exits (up to the part's ``restarts``), and stopped with the
job. Each instance's state is a file in the job dir (``services/<part>/<node>-<i>.json``): the
head waits on them before the driver starts and ends the job when a required one is past its
restarts (service_watch.py); ``slurm_rl.services()`` and the balancer read them."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import urllib.request
from dataclasses import dataclass, field

from ..core.events import write_json
from ..core.job_env import JobEnvironment
from ..core.parts import Part
from ..core.ports import free_ports
from .context import NodeContext
from .isolation import code_dir_for, hidden_dirs, isolated_argv
from .service_remote import RemoteProcess, run_script

POLL_S = 0.2
RESTART_BACKOFF_S = 0.5  # times the restart's number, at most 5 s
STOP_GRACE_S = 3.0
# what an isolated instance never gets: the job's Ray (address, token) and its job dir
ISOLATED_DROP = ("RAY_", "SLURM_RL_")


def is_ready(how: str, host: str, port: int) -> bool:
    """``tcp``: the port accepts; ``http:/PATH``: GET answers 2xx."""
    if how == "tcp":
        try:
            with socket.create_connection((host, port), timeout=1.0):
                return True
        except OSError:
            return False
    try:
        with urllib.request.urlopen(f"http://{host}:{port}{how.removeprefix('http:')}", timeout=2.0) as res:
            return 200 <= res.status < 300
    except (OSError, ValueError):
        return False


def gpu_shares(visible: list[str], per_instance: int, instances: int) -> list[list[str]]:
    """Each instance's GPUs: the task's visible devices in equal, disjoint shares."""
    if per_instance <= 0:
        return [[] for _ in range(instances)]
    return [visible[i * per_instance : (i + 1) * per_instance] for i in range(instances)]


@dataclass
class Instance:
    index: int
    port: int
    gpus: list[str]
    proc: subprocess.Popen[bytes] | RemoteProcess | None = None
    restarts: int = 0
    state: str = "starting"  # starting, ready, restarting, failed, stopped
    restart_at: float = 0.0  # when a restarting instance starts again (a short backoff: its port frees)
    launches: int = 0  # how many times it was started (a remote instance's generation)
    exit_code: int | None = None
    started: float = field(default_factory=time.time)


class ServiceRunner:
    """The instances of one service part on this node (``count`` of them)."""

    def __init__(self, ctx: NodeContext, name: str, count: int, visible: list[str]) -> None:
        self.ctx, self.name = ctx, name
        self.part: Part = ctx.manifest.parts[name]
        shares = gpu_shares(visible, self.part.gpus_per_instance, count)
        # each instance binds its port itself, later: drawn outside the kernel's ephemeral range,
        # where no outgoing connection's source port can take it first (core/ports.py)
        ports = free_ports(count)
        self.instances = [Instance(i, ports[i], shares[i]) for i in range(count)]
        self.workdir = ctx.manifest.service_code_dir(ctx.paths.job_dir)  # the job's copy of the experiment's dir
        self.isolated = self.part.is_isolated(ctx.manifest.container.image)
        self.remote = name in ctx.manifest.own_image_parts

    def additions(self, inst: Instance) -> dict[str, str]:
        """What the instance's environment has beyond the task's (or, remote, the step's)."""
        add: dict[str, str] = {}
        if self.isolated:
            add["SLURM_RL_SERVICE_DIR"] = str(self.ctx.paths.service_home(self.name, self.ctx.node, inst.index))
            add["TMPDIR"] = self.ctx.manifest.node_local_dir  # an empty tmpfs of its own there (isolation.py)
        add.update(self.part.env)
        add.update(PORT=str(inst.port), SLURM_RL_SERVICE=self.name, SLURM_RL_SERVICE_INSTANCE=str(inst.index))
        if self.part.gpus_per_node:
            add["CUDA_VISIBLE_DEVICES"] = ",".join(inst.gpus)
        return add

    def env(self, inst: Instance) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not (self.isolated and k.startswith(ISOLATED_DROP))}
        return {**env, **self.additions(inst)}

    def launch(self, inst: Instance) -> None:
        log_path = self.ctx.paths.service_log(self.name, self.ctx.node, inst.index)
        log_path.parent.mkdir(parents=True, exist_ok=True)
        command = (self.part.service or "").replace("{port}", str(inst.port))
        argv, cwd = ["bash", "-c", command], self.workdir if os.path.isdir(self.workdir) else None
        if self.isolated:  # isolation.py: its own PID and mount namespaces; only its dir and the code
            home = self.ctx.paths.service_home(self.name, self.ctx.node, inst.index)
            home.mkdir(mode=0o700, parents=True, exist_ok=True)
            job_dir = str(self.ctx.paths.job_dir)
            user_home = os.environ.get("HOME", "")
            hide = hidden_dirs(job_dir, self.ctx.manifest.node_local_dir, user_home)
            argv, cwd = isolated_argv(command, str(home), code_dir_for(cwd or "", job_dir), user_home, hide), None
        inst.launches += 1
        if self.remote:  # in the part's own image, by its supervisor step (service_remote.py)
            base = self.ctx.paths.services / self.name / f"{self.ctx.node}-{inst.index}"
            drop = ISOLATED_DROP if self.isolated else ()
            script = run_script(argv, self.additions(inst), cwd or "", log_path, drop)
            inst.proc = RemoteProcess(base, inst.launches, script)
        else:
            with open(log_path, "ab") as log, self.ctx.spawns.starting(f"service {self.name}"):  # spawn_gate.py
                inst.proc = subprocess.Popen(
                    argv,
                    cwd=cwd,
                    env=self.env(inst),
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    start_new_session=True,  # its own process group: stopped whole
                )
        inst.state, inst.started, inst.exit_code = "starting", time.time(), None
        self.ctx.event("service_start", service=self.name, instance=inst.index, port=inst.port, pid=inst.proc.pid,
                       **({"image": self.part.image} if self.remote else {}))  # fmt: skip
        self.publish(inst)

    def start(self) -> None:
        for inst in self.instances:
            self.launch(inst)

    def poll(self) -> None:
        for inst in self.instances:
            if inst.proc is None or inst.state in ("failed", "stopped"):
                continue
            if inst.state == "restarting":
                if time.time() >= inst.restart_at:
                    self.launch(inst)
                continue
            rc = inst.proc.poll()
            if rc is not None:
                self.exited(inst, rc)
            elif inst.state == "starting" and is_ready(self.part.ready, self.ctx.ip, inst.port):
                inst.state = "ready"
                self.ctx.event("service_ready", service=self.name, instance=inst.index, port=inst.port,
                               after_s=round(time.time() - inst.started, 2))  # fmt: skip
                self.publish(inst)
            elif inst.state == "starting" and time.time() - inst.started > self.part.ready_timeout_s:
                self.ctx.say(f"service {self.name} instance {inst.index} not ready in {self.part.ready_timeout_s:g} s")
                stop_group(inst.proc)
                self.exited(inst, inst.proc.wait(), why="not ready in time")

    def exited(self, inst: Instance, rc: int, why: str = "") -> None:
        inst.exit_code = rc
        if self.ctx.stop_requested.is_set() or self.ctx.paths.exit_code.exists():  # the job's end stopped it
            inst.state = "stopped"
            self.publish(inst)
            return
        again = inst.restarts < self.part.restarts
        self.ctx.event("service_exit", service=self.name, instance=inst.index, exit_code=rc,
                       restart=again, restarts=inst.restarts, **({"why": why} if why else {}))  # fmt: skip
        if again:
            inst.restarts += 1
            inst.state, inst.restart_at = "restarting", time.time() + min(RESTART_BACKOFF_S * inst.restarts, 5.0)
            self.publish(inst)
            return
        inst.state = "failed"
        self.ctx.say(f"service {self.name} instance {inst.index} exited {rc} after {inst.restarts} restart(s)")
        self.publish(inst)

    def publish(self, inst: Instance) -> None:
        host = self.ctx.ip
        write_json(
            self.ctx.paths.service_state(self.name, self.ctx.node, inst.index),
            {
                "service": self.name,
                "node": self.ctx.node,
                "instance": inst.index,
                "host": host,
                "port": inst.port,
                "url": f"http://{host}:{inst.port}",
                "state": inst.state,
                "ready": inst.state == "ready",
                "restarts": inst.restarts,
                "exit_code": inst.exit_code,
                "gpus": inst.gpus,
                "pid": inst.proc.pid if inst.proc else None,
                "log": str(self.ctx.paths.service_log(self.name, self.ctx.node, inst.index)),
                "attempt": self.ctx.attempt,
                "t": time.time(),
            },
        )

    def run(self, ctx: NodeContext) -> None:
        """Start the instances, keep them (restarts, readiness) until the job stops, stop them."""
        self.start()
        try:
            while not ctx.stop_requested.is_set():
                self.poll()
                time.sleep(POLL_S)
        finally:
            self.stop()

    def stop(self) -> None:
        for inst in self.instances:
            if inst.proc is not None and inst.proc.poll() is None:
                stop_group(inst.proc)
            if inst.state != "failed":
                inst.state = "stopped"
                self.publish(inst)


def stop_group(proc: subprocess.Popen[bytes] | RemoteProcess) -> None:
    """SIGTERM to the instance's process group, SIGKILL after a grace (a remote one's
    supervisor does it)."""
    if isinstance(proc, RemoteProcess):
        proc.stop()
        return
    for sig, wait_s in ((signal.SIGTERM, STOP_GRACE_S), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait_s)
            return
        except subprocess.TimeoutExpired:
            continue


def run_service(ctx: NodeContext) -> int:
    """A service part's task: its instances on this node until the job stops."""
    part = ctx.manifest.parts[ctx.part]
    runner = ServiceRunner(ctx, ctx.part, part.replicas_per_node, JobEnvironment.current().visible_gpus() or [])
    ctx.say(f"service {ctx.part}: {len(runner.instances)} instance(s) on ports {[i.port for i in runner.instances]}")
    runner.run(ctx)
    return 0
