"""Two of Ray's Python daemons run as threads of the node bootstrap instead of processes of their
own: the log monitor (every node: streams the workers' output into the driver's log) and the
autoscaler's monitor (the head: what `ray status` reports).

`ray start` spawns each as `python <script>.py`: a fresh interpreter whose start is almost all
its cost (importing Ray: ~0.4-0.5 CPU-s and ~80-100 MB each, on every node of every job), for a
loop that then reads a few files ten times a second, or asks the GCS for the cluster's load every
5 s. The bootstrap has imported all of that for `ray start` already, and lives exactly as long as
the node's Ray. So it runs Ray's own classes (``LogMonitor``, ``Monitor``: the same files, the
same GCS calls, the same logs under ``<session>/logs``) in threads. Ray's scripts loop forever
and install signal handlers (possible only in a main thread); here each loop has a stop: a second
`ray start` on the node (job/context.py retries one) or the node's cleanup ends it before the
GCS it talks to goes away. A monitor that Ray would start differently (an autoscaling config,
autoscaler v2) stays Ray's own process.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

IDLE_S = 0.1  # Ray's log monitor: how long it waits when nothing was published
_lock = threading.Lock()
_running: dict[str, tuple[threading.Event, threading.Thread]] = {}


class _Halted(BaseException):
    """Raised inside Ray's monitor loop once it is told to stop (its loop catches Exception)."""


def run_in_this_process() -> None:
    """From now on, `ray start` in this process starts these two daemons as threads here."""
    import ray._private.node

    node_class = ray._private.node.Node
    if getattr(node_class.start_log_monitor, "slurm_rl_thread", False):
        return
    ray_start_monitor = node_class.start_monitor

    def start_log_monitor(node: Any) -> None:
        _start("log monitor", _log_monitor, node.gcs_address, node._node_ip_address, node._logs_dir)

    def start_monitor(node: Any) -> None:
        from ray.autoscaler.v2.utils import is_autoscaler_v2

        if node._ray_params.autoscaling_config or is_autoscaler_v2(fetch_from_server=True):
            ray_start_monitor(node)  # not the plain status monitor of a fixed cluster: Ray's process
            return
        _start("monitor", _autoscaler_monitor, node.gcs_address, node._node_ip_address, node._logs_dir)

    for name, patch in (("start_log_monitor", start_log_monitor), ("start_monitor", start_monitor)):
        patch.slurm_rl_thread = True  # type: ignore[attr-defined]
        setattr(node_class, name, patch)


def running() -> list[str]:
    """The daemons that run as threads here now."""
    with _lock:
        return sorted(k for k, (_, t) in _running.items() if t.is_alive())


def stop(timeout_s: float = 0.2) -> None:
    """Tell every daemon thread of this process to end, and wait for them up to ``timeout_s`` in
    all (the log monitor ends within IDLE_S; the monitor at its next round, up to 5 s on: it is
    a daemon thread, and told to stop it makes no further GCS call)."""
    with _lock:
        ended = list(_running.values())
        _running.clear()
    for halt, _ in ended:
        halt.set()
    deadline = time.monotonic() + timeout_s
    for _, thread in ended:
        thread.join(max(0.0, deadline - time.monotonic()))


def _start(kind: str, target: Callable[..., None], *args: str) -> None:
    """Start ``kind``'s thread, ending the one of an earlier `ray start` in this process."""
    halt = threading.Event()
    thread = threading.Thread(target=target, args=(halt, *args), name=f"ray {kind}", daemon=True)
    with _lock:
        before, _running[kind] = _running.get(kind), (halt, thread)
    if before is not None:
        before[0].set()
    thread.start()


def _log_to(path: Path, *loggers: str) -> logging.Logger:
    """These loggers write to ``path`` (as Ray's process would), not into the node's own log."""
    handler = logging.FileHandler(path)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(filename)s:%(lineno)s -- %(message)s"))
    for name in loggers:
        logger = logging.getLogger(name)
        for h in list(logger.handlers):
            logger.removeHandler(h)
            h.close()
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        logger.propagate = False
    return logging.getLogger(loggers[0])


def _log_monitor(halt: threading.Event, gcs_address: str, node_ip: str, logs_dir: str) -> None:
    logger = _log_to(Path(logs_dir) / "log_monitor.log", "ray._private.log_monitor")
    gcs = None
    try:
        from ray._private.log_monitor import LogMonitor, is_proc_alive
        from ray._raylet import GcsClient  # type: ignore[attr-defined]

        gcs = GcsClient(address=gcs_address)
        monitor = LogMonitor(node_ip, logs_dir, gcs, is_proc_alive, gcs_address=gcs_address)
        last_scan = time.time()
        while not halt.is_set():
            if monitor.should_update_filenames(last_scan):
                monitor.update_log_filenames()
                last_scan = time.time()
            monitor.open_closed_files()
            if not monitor.check_log_files_and_publish_updates():
                halt.wait(IDLE_S)
    except Exception:
        if not halt.is_set():  # as Ray's process would: in its log, and to every driver
            logger.exception("the log monitor stopped: workers' output no longer reaches the driver")
            _tell_drivers(gcs, f"The log monitor on node {node_ip} failed with the following error:")


def _autoscaler_monitor(halt: threading.Event, gcs_address: str, node_ip: str, logs_dir: str) -> None:
    logger = _log_to(Path(logs_dir) / "monitor.log", "ray.autoscaler")
    monitor = None
    try:
        import ray._private.ray_constants as ray_constants
        from ray.autoscaler._private.monitor import Monitor
        from ray.experimental import internal_kv

        monitor = Monitor(gcs_address, None, log_dir=logs_dir, monitor_ip=node_ip)  # type: ignore[arg-type]  # as Ray passes it
        update = monitor.update_load_metrics

        def update_unless_halted() -> None:  # the first call of each round of Ray's loop
            if halt.is_set():
                raise _Halted
            update()

        monitor.update_load_metrics = update_unless_halted  # type: ignore[method-assign]
        if internal_kv._internal_kv_initialized():
            internal_kv._internal_kv_del(ray_constants.DEBUG_AUTOSCALING_ERROR)
        monitor._initialize_autoscaler()
        monitor._run()
    except _Halted:
        pass
    except Exception:
        if not halt.is_set():
            logger.exception("Error in monitor loop")
            if monitor is not None:
                with contextlib.suppress(Exception):
                    monitor._handle_failure(traceback.format_exc())  # `ray status` and drivers are told


def _tell_drivers(gcs: Any, headline: str) -> None:
    import ray._private.ray_constants as ray_constants
    import ray._private.utils

    with contextlib.suppress(Exception):  # the GCS may be what failed
        ray._private.utils.publish_error_to_driver(
            ray_constants.LOG_MONITOR_DIED_ERROR, f"{headline}\n{traceback.format_exc()}", gcs_client=gcs
        )
