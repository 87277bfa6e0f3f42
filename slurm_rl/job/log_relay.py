"""Ray's log monitor (what streams the workers' output into the driver's log), run as a thread of
the node bootstrap instead of a Python process of its own.

`ray start` spawns `python log_monitor.py` on every node: a fresh interpreter whose start is
almost all its cost (importing Ray, ~0.4 CPU-s and ~80 MB per node, each job, for a loop that
then reads a few files ten times a second). The bootstrap has imported Ray already and lives
exactly as long as the node's Ray, so it runs Ray's own ``LogMonitor`` (the same class, the same
files, the same publishing to the GCS) in a thread. Ray's script loops forever; this loop is the
same three steps with a stop: a second `ray start` on the node (job/context.py retries one) or
the node's cleanup ends it before the GCS it publishes to goes away. Its own log is where Ray
puts the process's: ``<session>/logs/log_monitor.log``.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import traceback
from pathlib import Path
from typing import Any

IDLE_S = 0.1  # Ray's log monitor: how long it waits when nothing was published
_lock = threading.Lock()
_running: tuple[threading.Event, threading.Thread] | None = None


def run_in_this_process() -> None:
    """From now on, `ray start` in this process starts the log monitor as a thread here."""
    import ray._private.node

    node_class = ray._private.node.Node
    if getattr(node_class.start_log_monitor, "slurm_rl_log_relay", False):
        return

    def start_log_monitor(node: Any) -> None:
        start(node.gcs_address, node._node_ip_address, node._logs_dir)

    start_log_monitor.slurm_rl_log_relay = True  # type: ignore[attr-defined]
    setattr(node_class, "start_log_monitor", start_log_monitor)  # noqa: B010 - a patch, on purpose


def start(gcs_address: str, node_ip: str, logs_dir: str) -> None:
    """The log monitor of the node whose GCS is ``gcs_address``, replacing one of an earlier
    start in this process."""
    global _running
    stop()
    halt = threading.Event()
    thread = threading.Thread(
        target=_monitor, args=(halt, gcs_address, node_ip, logs_dir), name="ray-log-monitor", daemon=True
    )
    with _lock:
        _running = (halt, thread)
    thread.start()


def stop(timeout_s: float = 1.0) -> None:
    """End the running log monitor, if any (waits up to ``timeout_s`` for its loop to end)."""
    global _running
    with _lock:
        running, _running = _running, None
    if running is not None:
        halt, thread = running
        halt.set()
        thread.join(timeout_s)


def _own_log(logs_dir: str) -> logging.Logger:
    logger = logging.getLogger("ray._private.log_monitor")
    for h in list(logger.handlers):
        logger.removeHandler(h)
        h.close()
    handler = logging.FileHandler(Path(logs_dir) / "log_monitor.log")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(filename)s:%(lineno)s -- %(message)s"))
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False  # not into the node's own log
    return logger


def _monitor(halt: threading.Event, gcs_address: str, node_ip: str, logs_dir: str) -> None:
    logger = _own_log(logs_dir)
    gcs = None
    try:
        import ray.experimental.internal_kv as internal_kv
        from ray._private.log_monitor import LogMonitor, is_proc_alive
        from ray._raylet import GcsClient  # type: ignore[attr-defined]

        internal_kv._internal_kv_reset()  # a GCS of an earlier start in this process is gone
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
            _tell_drivers(gcs, node_ip, traceback.format_exc())


def _tell_drivers(gcs: Any, node_ip: str, trace: str) -> None:
    import ray._private.ray_constants as ray_constants
    import ray._private.utils

    message = f"The log monitor on node {node_ip} failed with the following error:\n{trace}"
    with contextlib.suppress(Exception):  # the GCS may be what failed
        ray._private.utils.publish_error_to_driver(ray_constants.LOG_MONITOR_DIED_ERROR, message, gcs_client=gcs)
