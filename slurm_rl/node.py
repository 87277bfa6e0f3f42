"""The node bootstrap: ``python -m slurm_rl.node``, started on every node by one srun.

Node 0 starts the Ray head, waits until every node has joined, runs the driver with
``RAY_ADDRESS`` set, then tells the other nodes to stop. The other nodes join the head as soon
as its GCS port accepts connections, then wait for the stop. Every bootstrap owns the Ray
processes of its node: it is their child subreaper, and whatever ends the job (driver exit,
scancel, time limit, a failed node) it stops exactly the processes of this job on its node,
copies Ray's logs to the job dir and removes the job's node-local temp dir.

Kept light on imports: it does not import ray (``ray start`` runs as a subprocess).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from .events import append_event, write_atomic, write_json
from .nodelist import expand_hostlist
from .paths import JobPaths, node_temp_dir
from .ports import RayPorts, ports_for
import psutil

from .procs import MARKER_ENV, stop_job_processes

PR_SET_CHILD_SUBREAPER = 36
POLL_S = 0.05
DRIVER_GRACE_S = 2.0  # a signalled driver gets this long to exit (checkpoint) before the kill
STOPPED_RC = 143      # 128 + SIGTERM: the job was stopped from outside


class NodeFailure(Exception):
    """This node cannot go on; the message names what failed and where to look."""


class Stopped(Exception):
    """The job is being stopped from outside (signal) or by node 0; not this node's fault."""


class Bootstrap:
    def __init__(self, args: argparse.Namespace, environ: dict[str, str]) -> None:
        self.args = args
        self.job_id = environ["SLURM_JOB_ID"]
        self.rank = int(environ.get("SLURM_NODEID", "0"))
        self.node = environ.get("SLURMD_NODENAME") or socket.gethostname()
        self.nodes = expand_hostlist(environ.get("SLURM_JOB_NODELIST", self.node))
        self.cpus = int(environ.get("SLURM_CPUS_ON_NODE", "1"))
        self.gpus = _gpu_count(environ)
        self.paths = JobPaths(Path(args.job_dir))
        # SLURM counts requeues; every marker file is per attempt so a requeued job starts fresh
        self.attempt = int(environ.get("SLURM_RESTART_COUNT", "0") or 0)
        self.stop_flag = self.paths.stop_flag_for(self.attempt)
        self.ports: RayPorts = ports_for(int(self.job_id), args.port_base)
        self.temp_dir = node_temp_dir(self.job_id)
        self.stop_requested = threading.Event()
        self.stop_reason = ""
        self.driver: subprocess.Popen[bytes] | None = None
        self._stop_seen_at: float | None = None
        self.log = open(self.paths.node_log(self.node), "a", buffering=1)  # noqa: SIM115

    # ---- helpers -------------------------------------------------------------------------
    def say(self, msg: str) -> None:
        self.log.write(f"[{time.strftime('%H:%M:%S')} {self.node} rank {self.rank}] {msg}\n")

    def event(self, name: str, **fields: object) -> None:
        append_event(self.paths.events, name, node=self.node, rank=self.rank, attempt=self.attempt, **fields)

    def on_signal(self, signum: int, _frame: object) -> None:
        name = signal.Signals(signum).name
        if signum == signal.SIGCONT:
            return  # scancel sends SIGCONT before SIGTERM
        self.say(f"received {name}")
        if not self.stop_requested.is_set():
            self.stop_reason = f"{name} received on {self.node} (scancel, time limit or preemption)"
        self.stop_requested.set()
        if self.driver is not None and self.driver.poll() is None:
            try:
                self.driver.send_signal(signum)
            except ProcessLookupError:
                pass

    def wait_until(self, condition, deadline_s: float, what: str) -> None:  # type: ignore[no-untyped-def]
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
        """`ray start` in this process (ray is imported already), daemons as our children."""
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

    # ---- roles ---------------------------------------------------------------------------
    def run_head(self) -> int:
        head_ip = self.node_ip(self.node)
        self.ray_start(["--head", f"--port={self.ports.gcs}", "--include-dashboard=false", "--no-monitor",
                        f"--dashboard-port={self.ports.dashboard}"])
        address = f"{head_ip}:{self.ports.gcs}"
        self.event("node_up", address=address)
        cluster = {"job_id": int(self.job_id), "head_node": self.node, "head_ip": head_ip, "address": address,
                   "ports": self.ports.as_dict(), "nodes": self.nodes, "temp_dir": self.temp_dir,
                   "attempt": self.attempt, "ready_time": None}
        write_json(self.paths.cluster, cluster)
        up_dir = self.paths.markers
        def all_up() -> bool:
            failed = list(up_dir.glob(f"{self.attempt}-*.failed"))
            if failed:
                raise NodeFailure(failed[0].read_text().strip())
            return len(list(up_dir.glob(f"{self.attempt}-*.up"))) >= len(self.nodes) - 1
        self.wait_until(all_up, self.args.ready_timeout_s, f"{len(self.nodes)} nodes to join the Ray head")
        write_json(self.paths.cluster, {**cluster, "ready_time": time.time()})
        self.event("ready", nodes=len(self.nodes))
        return self.run_driver(address)

    def run_driver(self, address: str) -> int:
        exp = os.environ.get("SLURM_RL_EXPERIMENT", str(self.paths.experiment))
        workdir = os.environ.get("SLURM_RL_WORKDIR", os.getcwd())
        env = dict(os.environ)
        env["RAY_ADDRESS"] = address
        env["SLURM_RL_RAY_ADDRESS"] = address
        src_dir = os.environ.get("SLURM_RL_EXPERIMENT_SRC_DIR")
        if src_dir:  # imports next to the original experiment keep working
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [src_dir, env.get("PYTHONPATH")]))
        argv = [sys.executable, exp, *json.loads(os.environ.get("SLURM_RL_EXPERIMENT_ARGS", "[]"))]
        self.event("driver_start", argv=argv)
        with open(self.paths.driver_log, "ab") as out:
            # SLURM delivers step signals to every process of the step (proctrack), the driver
            # included; SIGUSR2 arrives ignored (inherited from us) unless on_preempt hooks it
            self.driver = subprocess.Popen(argv, cwd=workdir, env=env, stdout=out, stderr=subprocess.STDOUT,
                                           stdin=subprocess.DEVNULL)
            if self.stop_requested.is_set():
                self.driver.terminate()
            rc = self.driver.wait()
        self.event("driver_end", exit_code=rc)
        return rc

    def run_worker(self) -> int:
        head = self.nodes[0]
        head_ip = self.node_ip(head)
        import ray.scripts.scripts  # noqa: F401 - imported while the head starts: overlaps the wait

        address = f"{head_ip}:{self.ports.gcs}"
        # Join only once the head has published its session: `ray start` would otherwise sleep
        # 1-2 s between its own retries.
        self.wait_until(lambda: _port_open(head_ip, self.ports.gcs) and _session_published(address),
                        self.args.ready_timeout_s, f"the Ray head on {head} ({address})")
        self.ray_start([f"--address={address}"])
        self.event("node_up")
        write_atomic(self.paths.node_marker(self.attempt, self.rank, "up"), self.node + "\n")
        # Stay until node 0 says stop (driver ended), SLURM signals us, or the head goes away.
        lost_since = None
        while not self.stop_requested.is_set():
            if self.stop_flag.exists():
                self.stop_reason = "driver ended"
                break
            if _port_open(head_ip, self.ports.gcs):
                lost_since = None
            elif lost_since is None:
                lost_since = time.monotonic()
            elif time.monotonic() - lost_since > 2.0:
                self.stop_reason = f"Ray head on {head} unreachable"
                break
            time.sleep(0.25)
        return 0

    # ---- lifecycle -------------------------------------------------------------------------
    def cleanup(self) -> None:
        t0 = time.monotonic()
        try:  # what we started, and orphans re-parented to us (we are their subreaper)
            descendants = [p.pid for p in psutil.Process().children(recursive=True)]
        except psutil.Error:
            descendants = []
        if self.driver is not None and self.driver.poll() is None:
            self.driver.terminate()
            try:
                self.driver.wait(timeout=2.0)
            except subprocess.TimeoutExpired:
                self.driver.kill()
        self._copy_ray_logs()
        killed = stop_job_processes(self.job_id, self.temp_dir, grace_s=0.5, also=descendants)
        shutil.rmtree(self.temp_dir, ignore_errors=True)
        self.say(f"cleanup: stopped {len(killed)} processes in {time.monotonic() - t0:.2f} s: "
                 + ", ".join(f"{k.name}({k.pid},{k.signal})" for k in killed))
        self.event("node_cleaned", killed=len(killed), seconds=round(time.monotonic() - t0, 3))

    def _copy_ray_logs(self) -> None:
        src = Path(self.temp_dir) / "session_latest" / "logs"
        if src.is_dir():
            try:
                shutil.copytree(src, self.paths.ray_logs(self.node), dirs_exist_ok=True,
                                ignore=shutil.ignore_patterns("*.sock"))
            except (OSError, shutil.Error) as exc:
                self.say(f"could not copy Ray logs: {exc}")

    def setup_failure(self) -> str:
        from .render import SETUP_FIRST_LINE

        index = self.args.failed_setup_line - SETUP_FIRST_LINE
        try:
            setup = json.loads(self.paths.spec.read_text()).get("setup", [])
            text = repr(setup[index]) if 0 <= index < len(setup) else "?"
        except (OSError, ValueError):
            text = "?"
        return (f"setup[{index}] {text} exited {self.args.failed_setup_rc} (spec field 'setup'; "
                f"its output is in {self.paths.batch_log})")

    def run_role(self) -> int:
        """Node 0: head + driver, returns the driver's exit code. Others: join, wait for stop."""
        if self.args.failed_setup_line is not None:
            raise NodeFailure(self.setup_failure())
        self.event("node_start", ip=self.node_ip(self.node), cpus=self.cpus, gpus=self.gpus)
        return self.run_head() if self.rank == 0 else self.run_worker()

    def run(self) -> int:
        """Run the role in a thread so that a stop (signal, failed node) is acted on at once,
        even while `ray start` is blocked in C code; then clean up and return the exit code."""
        done = threading.Event()
        outcome: dict[str, object] = {}

        def target() -> None:
            try:
                outcome["rc"] = self.run_role()
            except NodeFailure as exc:
                outcome["failure"] = exc
            except Stopped:
                pass
            except BaseException as exc:  # noqa: BLE001 - reported, then the node stops
                outcome["failure"] = NodeFailure(f"unexpected error in the bootstrap: {exc!r}")
            finally:
                done.set()

        threading.Thread(target=target, name="role", daemon=True).start()
        while not done.wait(POLL_S):
            if self.stop_requested.is_set() and not self._driver_running(DRIVER_GRACE_S):
                break
        try:
            if "failure" in outcome:
                exc = outcome["failure"]
                msg = f"{self.node}: {exc}; see {self.paths.node_log(self.node)}"
                self.say(f"FAILED: {exc}")
                self.event("node_failed", error=str(exc))
                write_atomic(self.paths.node_marker(self.attempt, self.rank, "failed"), msg + "\n")
                self.finish(1, msg)
                return 1
            rc = outcome.get("rc")
            if not isinstance(rc, int):  # stopped before the role finished
                self.event("node_stopped", reason=self.stop_reason)
                if self.stop_flag.exists():  # node 0 had finished: a normal end
                    return 0
                self.finish(STOPPED_RC, self.stop_reason or "stopped")
                return STOPPED_RC
            if self.rank == 0:
                reason = self.stop_reason or f"driver exited {rc}"
                if rc < 0:
                    reason = f"driver killed by signal {signal.Signals(-rc).name}"
                    rc = 128 - rc
                self.finish(rc, reason)
            return rc
        finally:
            self.cleanup()

    def _driver_running(self, grace_s: float) -> bool:
        """True while a signalled driver may still exit by itself (it got the signal too)."""
        if self.driver is None or self.driver.poll() is not None:
            return False
        if self._stop_seen_at is None:
            self._stop_seen_at = time.monotonic()
        return time.monotonic() - self._stop_seen_at < grace_s

    def finish(self, rc: int, reason: str) -> None:
        if not self.paths.exit_code.exists():
            write_atomic(self.paths.exit_code, f"{rc}\n")
            write_atomic(self.paths.exit_reason, reason + "\n")
        self.stop_flag.touch()


def _gpu_count(environ: dict[str, str]) -> int:
    visible = environ.get("CUDA_VISIBLE_DEVICES", "")
    if visible and visible != "NoDevFiles":
        return len([d for d in visible.split(",") if d.strip()])
    try:
        return int(environ.get("SLURM_GPUS_ON_NODE", "0"))
    except ValueError:
        return 0


def _port_open(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.2):
            return True
    except OSError:
        return False


def _session_published(address: str) -> bool:
    from ray._raylet import GcsClient

    try:
        return GcsClient(address=address).internal_kv_get(b"session_name", b"session", timeout=1) is not None
    except Exception:  # GCS not answering yet
        return False


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m slurm_rl.node", description=__doc__)
    p.add_argument("--job-dir", required=True)
    p.add_argument("--nodes", type=int, required=True)
    p.add_argument("--ready-timeout-s", type=float, default=180.0)
    p.add_argument("--port-base", type=int, default=None)
    p.add_argument("--failed-setup-line", type=int, default=None,
                   help="(from the ERR trap) the node script line of the setup line that failed")
    p.add_argument("--failed-setup-rc", type=int, default=None)
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if "SLURM_JOB_ID" not in os.environ:
        print("slurm_rl.node runs inside a SLURM job step (started by the sbatch script)", file=sys.stderr)
        return 2
    try:  # orphaned Ray daemons re-parent to us, so they stay in this job step's process tree
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (OSError, AttributeError):
        pass
    Path(args.job_dir, "logs").mkdir(parents=True, exist_ok=True)
    Path(args.job_dir, "nodes").mkdir(parents=True, exist_ok=True)
    # The marker goes last in the environment children inherit: processes that rewrite their
    # title (Ray's "ray::..." workers) overwrite the start of /proc/PID/environ.
    os.environ.pop(MARKER_ENV, None)
    os.environ[MARKER_ENV] = os.environ["SLURM_JOB_ID"]
    boot = Bootstrap(args, dict(os.environ))
    # Everything this node prints (ray start included) goes to logs/node-<name>.log.
    os.dup2(boot.log.fileno(), 1)
    os.dup2(boot.log.fileno(), 2)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGCONT):
        signal.signal(sig, boot.on_signal)
    # The job's warning signal (--signal, USR2) reaches every process of the step. Ignoring it
    # here makes every child (Ray, the driver) inherit "ignore": only a driver that asked for
    # it with slurm_rl.on_preempt(callback) reacts.
    signal.signal(signal.SIGUSR2, signal.SIG_IGN)
    return boot.run()


if __name__ == "__main__":
    sys.exit(main())
