"""One small actor per node and Ray job that looks at worker processes from their own node:
CPU and memory of a pid (psutil), GPU memory (NVML, when ``nvidia-ml-py`` is installed), a
Python stack (py-spy), the node's free memory, and a watchdog that stops a process whose
resident memory passes its limit (and remembers why, so the driver can say so).

The actor asks Ray for no CPU, is pinned to its node, and is threaded so that a watchdog tick,
a stack dump and a usage query never wait for each other."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from typing import Any

WATCH_PERIOD_S = 0.2
STACK_TIMEOUT_S = 20.0


def _gpu_memory_by_pid() -> dict[int, int]:
    """Bytes of GPU memory per pid on this node; {} without NVML or GPUs."""
    try:
        import pynvml  # nvidia-ml-py
    except ImportError:
        return {}
    try:
        pynvml.nvmlInit()
    except Exception:  # noqa: BLE001 - no driver: no GPU numbers
        return {}
    used: dict[int, int] = {}
    try:
        for i in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(i)
            for proc in pynvml.nvmlDeviceGetComputeRunningProcesses(handle):
                used[proc.pid] = used.get(proc.pid, 0) + int(proc.usedGpuMemory or 0)
    finally:
        pynvml.nvmlShutdown()
    return used


def py_spy() -> str | None:
    """py-spy installed next to this interpreter (a pip dependency), else on PATH."""
    beside = os.path.join(os.path.dirname(sys.executable), "py-spy")
    return beside if os.access(beside, os.X_OK) else shutil.which("py-spy")


class NodeProbe:
    def __init__(self) -> None:
        import psutil

        self._psutil = psutil
        self._procs: dict[int, Any] = {}
        self._limits: dict[int, tuple[int, str]] = {}
        self._causes: dict[int, str] = {}
        self._lock = threading.Lock()
        threading.Thread(target=self._watch_loop, name="memory-limit-watchdog", daemon=True).start()

    # ---- reading -----------------------------------------------------------------------------
    def _proc(self, pid: int) -> Any:
        if pid not in self._procs:
            proc = self._psutil.Process(pid)
            proc.cpu_percent(None)  # primes the counter; the next reading covers the time between
            self._procs[pid] = (proc, time.monotonic())
        return self._procs[pid]

    def usage(self, pids: list[int]) -> dict[int, dict[str, Any]]:
        """Per pid: cpu_percent (since the previous query, or over 0.2 s), rss bytes, gpu bytes."""
        fresh = [p for p in pids if p not in self._procs]
        for pid in fresh:
            try:
                self._proc(pid)
            except self._psutil.Error:
                pass
        if fresh:
            time.sleep(0.2)
        gpu = _gpu_memory_by_pid()
        out: dict[int, dict[str, Any]] = {}
        for pid in pids:
            try:
                proc, _ = self._proc(pid)
                with proc.oneshot():
                    out[pid] = {
                        "cpu_percent": proc.cpu_percent(None),
                        "rss_bytes": proc.memory_info().rss,
                        "gpu_memory_bytes": gpu.get(pid),
                    }
            except self._psutil.Error:
                self._procs.pop(pid, None)
                out[pid] = {"cpu_percent": None, "rss_bytes": None, "gpu_memory_bytes": None}
        return out

    def node_memory(self) -> dict[str, Any]:
        import ray

        vm = self._psutil.virtual_memory()
        return {"node": ray.util.get_node_ip_address(), "total_bytes": vm.total, "available_bytes": vm.available}

    def stack(self, pid: int) -> str:
        """The Python stack of every thread of ``pid`` (py-spy dump)."""
        exe = py_spy()
        if exe is None:
            return "stack unavailable: py-spy is not installed (pip install py-spy)"
        try:
            done = subprocess.run(
                [exe, "dump", "--pid", str(pid)], capture_output=True, text=True, timeout=STACK_TIMEOUT_S
            )
        except subprocess.TimeoutExpired:
            return f"stack unavailable: py-spy dump --pid {pid} did not answer within {STACK_TIMEOUT_S:g} s"
        if done.returncode != 0:
            return f"stack unavailable: py-spy: {(done.stderr or done.stdout).strip()[-500:]}"
        return done.stdout

    # ---- memory limits -----------------------------------------------------------------------
    def watch(self, pid: int, limit_bytes: int, label: str) -> None:
        with self._lock:
            self._limits[pid] = (limit_bytes, label)
            self._causes.pop(pid, None)

    def unwatch(self, pid: int) -> None:
        with self._lock:
            self._limits.pop(pid, None)

    def cause(self, pid: int) -> str | None:
        return self._causes.get(pid)

    def _watch_loop(self) -> None:
        while True:
            time.sleep(WATCH_PERIOD_S)
            with self._lock:
                limits = dict(self._limits)
            for pid, (limit, label) in limits.items():
                try:
                    rss = self._psutil.Process(pid).memory_info().rss
                except self._psutil.Error:
                    self.unwatch(pid)
                    continue
                if rss > limit:
                    self._causes[pid] = (
                        f"memory limit: {label} used {rss / 2**20:.0f} MiB, over its "
                        f"memory_limit of {limit / 2**20:.0f} MiB; stopped by slurm-rl"
                    )
                    self.unwatch(pid)
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except OSError:
                        pass


_PROBES: dict[tuple[str, str], Any] = {}


def probe_on(node_id: str) -> Any:
    """The probe actor of this Ray job on node ``node_id`` (created on first use)."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    key = (ray.get_runtime_context().get_job_id(), node_id)
    if key not in _PROBES:
        _PROBES[key] = (
            ray.remote(NodeProbe)
            .options(
                num_cpus=0,
                max_concurrency=8,
                name=f"slurm-rl-probe-{key[0]}-{node_id[:12]}",
                get_if_exists=True,
                scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=node_id, soft=False),
            )
            .remote()
        )
    return _PROBES[key]
