"""The node bootstrap's `ray start` runs Ray's log monitor as a thread of its own, not as a
process: a worker's print still reaches the driver, and no `log_monitor.py` process runs."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.ray

NODE = """
import json, sys, threading
import psutil
from slurm_rl.job import log_relay
from slurm_rl.job.ray_start import start_in_process
from slurm_rl.core.procs import stop_processes
temp_dir, port = sys.argv[1], sys.argv[2]
start_in_process(["--head", f"--port={port}", "--num-cpus=1", f"--temp-dir={temp_dir}", "--disable-usage-stats"])
children = psutil.Process().children(recursive=True)
from ray._private.services import get_node_ip_address
print(json.dumps({
    "address": f"{get_node_ip_address()}:{port}",
    "log_monitor_processes": [p.pid for p in children if any("log_monitor" in a for a in p.cmdline())],
    "threads": [t.name for t in threading.enumerate()],
}), flush=True)
sys.stdin.read()  # until the test is done with this node
log_relay.stop()
stopped = stop_processes(psutil.Process().children(recursive=True), grace_s=2)
print(json.dumps({"relay_threads": [t.name for t in threading.enumerate() if t.name == "ray-log-monitor"]}), flush=True)
"""

DRIVER = """
import sys, ray
ray.init(address=sys.argv[1])
@ray.remote(num_cpus=0)
def speak():
    print("a line a worker printed", flush=True)
ray.get(speak.remote())
sys.stdin.read()  # until the test saw the line (the log monitor sends it after the task ends)
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _line_with(proc: subprocess.Popen[str], text: str, timeout_s: float) -> str | None:
    """The first line of proc's stdout that contains ``text``, read until ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    assert proc.stdout is not None
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            return None
        if text in line:
            return line
    return None


def test_a_workers_print_reaches_the_driver_through_the_bootstraps_own_log_monitor() -> None:
    temp_dir = Path(tempfile.mkdtemp(prefix="srl-relay-", dir="/tmp"))  # short: Ray's sockets live there
    try:
        _node_and_driver(temp_dir, _free_port())
    finally:
        shutil.rmtree(temp_dir, ignore_errors=True)


def _node_and_driver(tmp_path: Path, port: int) -> None:
    env = {**os.environ, "RAY_AUTH_MODE": "disabled"}  # no token to hand from the node to the driver
    opts = {"stdin": subprocess.PIPE, "stdout": subprocess.PIPE, "text": True, "env": env}
    node = subprocess.Popen([sys.executable, "-c", NODE, str(tmp_path / "ray"), str(port)], **opts)  # type: ignore[call-overload]
    driver = None
    try:
        started = _line_with(node, "log_monitor_processes", 120)
        assert started, "the node's `ray start` did not return"
        seen = json.loads(started)
        assert seen["log_monitor_processes"] == [] and "ray-log-monitor" in seen["threads"], seen

        driver = subprocess.Popen([sys.executable, "-c", DRIVER, seen["address"]], **opts)  # type: ignore[call-overload]
        line = _line_with(driver, "a line a worker printed", 60)
        assert line and "pid=" in line, line  # Ray's prefix: it came through the log monitor
        logs = list((tmp_path / "ray").glob("session_*/logs/log_monitor.log"))
        assert logs and "Starting log monitor" in logs[0].read_text(), logs
    finally:
        if driver is not None and driver.poll() is None:
            driver.communicate(timeout=60)  # closes its stdin: it ends
        rest = node.communicate(timeout=60)[0] if node.poll() is None else ""  # the node stops its Ray
    assert node.returncode == 0
    assert json.loads(rest.splitlines()[-1]) == {"relay_threads": []}, rest  # stop() ended the thread
