"""The node bootstrap's `ray start` runs Ray's log monitor and autoscaler monitor as threads of
its own, not as processes: a worker's print still reaches the driver, `ray status` still reports
the cluster, and no `log_monitor.py` or `monitor.py` process runs."""

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
from slurm_rl.job import ray_threads
from slurm_rl.job.ray_start import start_in_process
from slurm_rl.core.procs import stop_processes
temp_dir, port = sys.argv[1], sys.argv[2]
start_in_process(["--head", f"--port={port}", "--num-cpus=1", f"--temp-dir={temp_dir}", "--disable-usage-stats"])
children = psutil.Process().children(recursive=True)
from ray._private.services import get_node_ip_address
print(json.dumps({
    "address": f"{get_node_ip_address()}:{port}",
    "python_processes": [" ".join(p.cmdline()[:3]) for p in children if "python" in p.name()],
    "threads": ray_threads.running(),
}), flush=True)
sys.stdin.read()  # until the test is done with this node
ray_threads.stop(timeout_s=10)
stopped = stop_processes(psutil.Process().children(recursive=True), grace_s=2)
print(json.dumps({"threads": [t.name for t in threading.enumerate() if t.name.startswith("ray ")]}), flush=True)
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


def test_worker_output_and_ray_status_come_from_monitors_running_as_threads_of_the_bootstrap() -> None:
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
        started = _line_with(node, "python_processes", 120)
        assert started, "the node's `ray start` did not return"
        seen = json.loads(started)
        assert seen["threads"] == ["log monitor", "monitor"], seen
        # Ray's two agents stay processes (the raylet starts them); no monitor script runs
        assert not [p for p in seen["python_processes"] if "monitor" in p], seen

        driver = subprocess.Popen([sys.executable, "-c", DRIVER, seen["address"]], **opts)  # type: ignore[call-overload]
        line = _line_with(driver, "a line a worker printed", 60)
        assert line and "pid=" in line, line  # Ray's prefix: it came through the log monitor
        logs = tmp_path / "ray" / "session_latest" / "logs"
        assert "Starting log monitor" in (logs / "log_monitor.log").read_text()
        # `ray status` reads what the monitor reports each round (every 5 s)
        ray_cli = str(Path(sys.executable).parent / "ray")
        deadline = time.monotonic() + 30
        while True:
            out = subprocess.run(
                [ray_cli, "status", "--address", seen["address"]], capture_output=True, text=True, env=env, timeout=60
            ).stdout
            if "Active:" in out or time.monotonic() > deadline:
                break
            time.sleep(1)  # its next round
        assert "Active:" in out and "1 node_" in out, out
        assert "Monitor: Started" in (logs / "monitor.log").read_text()
    finally:
        if driver is not None and driver.poll() is None:
            driver.communicate(timeout=60)  # closes its stdin: it ends
        rest = node.communicate(timeout=60)[0] if node.poll() is None else ""  # the node stops its Ray
    assert node.returncode == 0
    assert json.loads(rest.splitlines()[-1]) == {"threads": []}, rest  # stop() ended both threads
