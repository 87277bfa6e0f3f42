"""A node's cleanup and a start still in flight in its role thread (job/spawn_gate.py)."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from slurm_rl.job.context import Stopped
from slurm_rl.job.spawn_gate import SpawnGate
from tests.unit.test_job_roles import node_child

REPO = Path(__file__).resolve().parents[2]

# The shape CI met (a required service failed in 1 s while the head's `ray start` was mid-way):
# the main loop stops the node while the role thread is still starting a daemon of its own.
LATE_START_CHILD = node_child(
    0,
    """
def slow_start(self):
    with self.ctx.spawns.starting("Ray"):  # as ctx.ray_start: the GCS comes up a moment later
        print("starting", flush=True)
        self.ctx.stop_reason = "service judge failed on node2"
        self.ctx.stop_requested.set()  # the main loop's stop (a failed service), mid-start
        time.sleep(1.5)
        daemon = subprocess.Popen(["sleep", sys.argv[2]], start_new_session=True, stdout=subprocess.DEVNULL)
        Path(sys.argv[1], "daemon.pid").write_text(str(daemon.pid))
    self.ctx.wait_until(lambda: False, 120, "the stop")
    return 0

lifecycle.Lifecycle.run_role = slow_start
life = lifecycle.Lifecycle(ctx)
print("exit", life.run(), flush=True)
time.sleep(2.5)  # the process lives on a little after its cleanup (node.main's last writes)
""",
)


def test_a_start_in_flight_when_the_node_stops_leaves_no_process(tmp_path: Path) -> None:
    marker = "301.25"  # a sleep no other test starts
    child = subprocess.Popen(
        [sys.executable, "-c", LATE_START_CHILD, str(tmp_path), marker],
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    try:
        out, _ = child.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        child.kill()
        pytest.fail("the node never stopped")
    assert "starting" in out and "exit" in out, out
    pid = int((tmp_path / "daemon.pid").read_text())  # it did start: after the stop, before the cleanup

    def alive() -> bool:
        try:
            p = psutil.Process(pid)
            return p.status() != psutil.STATUS_ZOMBIE and marker in p.cmdline()
        except psutil.Error:
            return False

    end = time.monotonic() + 10
    while alive() and time.monotonic() < end:
        time.sleep(0.1)
    left = alive()
    if left:
        psutil.Process(pid).kill()
    assert not left, "the daemon started mid-stop outlived the node"
    assert "cleanup: stopped 1 processes" in (tmp_path / "node.log").read_text()


def test_no_start_begins_once_cleanup_closed_the_gate() -> None:
    gate = SpawnGate(Stopped)
    assert gate.close(wait_s=0.1)
    with pytest.raises(Stopped, match="not starting the driver: the node is cleaning up"), gate.starting("the driver"):
        pytest.fail("started after the close")


def test_a_start_that_never_ends_delays_cleanup_only_by_the_wait() -> None:
    gate = SpawnGate(Stopped)
    started, release = threading.Event(), threading.Event()

    def hung() -> None:
        with gate.starting("Ray"):
            started.set()
            release.wait(30)

    t = threading.Thread(target=hung, daemon=True)
    t.start()
    assert started.wait(10)
    t0 = time.monotonic()
    assert gate.close(wait_s=0.3) is False
    assert 0.25 < time.monotonic() - t0 < 5
    assert gate.closed
    release.set()
    t.join(10)


def test_cleanup_waits_for_one_of_rays_spawns_not_for_the_whole_ray_start() -> None:
    """`ray start` under load takes tens of seconds, and a time limit's SIGKILL comes KillWait
    after its SIGTERM: cleanup must not wait for it. Each daemon it spawns holds the gate, so
    cleanup waits for a spawn at most, and the spawn after it fails (ray_start.py)."""
    from ray._private import services

    from slurm_rl.job.ray_start import _gated_spawns

    gate, spawned, said = SpawnGate(Stopped), [], []
    gcs_waited = threading.Event()

    def a_ray_start() -> None:  # as Ray's: the GCS, a wait for it, then the raylet
        spawned.append(services.start_ray_process(["sleep", "302.5"], "gcs_server", fate_share=False))
        gcs_waited.wait(10)
        try:
            spawned.append(services.start_ray_process(["sleep", "302.5"], "raylet", fate_share=False))
        except Stopped as exc:
            said.append(str(exc))

    try:
        with _gated_spawns(gate):
            start = threading.Thread(target=a_ray_start)
            start.start()
            end = time.monotonic() + 10
            while not spawned and time.monotonic() < end:
                time.sleep(0.01)
            t0 = time.monotonic()
            assert gate.close(wait_s=5)
            closed_s = time.monotonic() - t0
            gcs_waited.set()
            start.join(10)
        assert closed_s < 1.0, f"cleanup waited {closed_s:.1f} s for a start in flight"
        assert said == ["not starting Ray's raylet: the node is cleaning up"]
        assert len(spawned) == 1
        assert services.start_ray_process.__name__ == "start_ray_process"  # Ray's own again
    finally:
        for info in spawned:
            info.process.kill()
            info.process.wait()
