"""TensorBoard over a job's event files (``<job dir>/tensorboard``, written by MetricsLog), started
where the command runs, bound to 127.0.0.1, for as long as the command runs: until Ctrl-C, or,
when a laptop drives it over ssh, until its stdin closes (the laptop went away)."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from ..core.errors import UsageError
from ..core.paths import JobPaths
from ..core.ports import free_port
from ..driver.metrics import TENSORBOARD_DIR

START_TIMEOUT_S = 120


def logdir_of(job: str, paths: JobPaths) -> Path:
    logdir = paths.job_dir / TENSORBOARD_DIR
    if not logdir.is_dir():
        raise UsageError(
            f"job {job} wrote no TensorBoard events ({logdir} does not exist): its driver logs with "
            f"slurm_rl.MetricsLog(job_dir) (tensorboard=True, the default) to have them"
        )
    return logdir


def start(logdir: Path) -> tuple[subprocess.Popen[bytes], int]:
    """TensorBoard on a free port of 127.0.0.1, once it answers; (its process, the port)."""
    port = free_port()  # outside the ephemeral range: no outgoing connection takes it before TensorBoard binds
    argv = [sys.executable, "-m", "tensorboard.main", "--logdir", str(logdir), "--host", "127.0.0.1"]
    proc = subprocess.Popen([*argv, "--port", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    end = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < end and proc.poll() is None:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return proc, port
        except OSError:
            time.sleep(0.2)
    proc.kill()
    said = (proc.stderr.read() if proc.stderr else b"").decode(errors="replace").strip().splitlines()
    raise UsageError(f"TensorBoard did not start on 127.0.0.1:{port}: {said[-1] if said else 'no answer'}")


def serve(proc: subprocess.Popen[bytes], until_stdin_closes: bool = False) -> None:
    """Wait until Ctrl-C (or, for a laptop over ssh, until stdin closes); then stop TensorBoard."""
    stdin_closed = threading.Event()

    def watch_stdin() -> None:
        sys.stdin.buffer.read()
        stdin_closed.set()

    if until_stdin_closes:
        threading.Thread(target=watch_stdin, daemon=True).start()
    try:
        while proc.poll() is None and not stdin_closed.wait(0.5):
            pass
    except KeyboardInterrupt:
        pass
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
