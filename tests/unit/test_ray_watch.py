"""A node's Ray daemons watched (job/ray_watch.py): stand-ins named as Ray's daemons are, children
of this process as Ray's are of the node bootstrap; their deaths are found with how they died,
reported only after a moment (a stop's own signal is no news), and the job's reason names them."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import psutil
import pytest

from slurm_rl.core.exits import RayDeath, ray_deaths, with_ray_deaths
from slurm_rl.job.ray_watch import Died, RayWatch, how_it_ended

pytestmark = pytest.mark.unit


def _daemon(tmp_path: Path, name: str, script: str) -> subprocess.Popen[bytes]:
    """A child whose process name is ``name`` (exec through a link of that name)."""
    link = tmp_path / name
    if not link.exists():
        link.symlink_to("/bin/sh")
    return subprocess.Popen([str(link), "-c", script])


def _cmd(process: psutil.Process) -> list[str]:
    try:
        return process.cmdline()
    except psutil.Error:  # gone since it was listed
        return []


def test_a_daemon_that_dies_is_named_with_how_it_died(tmp_path: Path) -> None:
    raylet = _daemon(tmp_path, "raylet", "sleep 60")
    gcs = _daemon(tmp_path, "gcs_server", "sleep 0.3; exit 3")
    other = _daemon(tmp_path, "dashboard", "sleep 60")  # not one of Ray's daemons the watch keeps
    try:
        watch = RayWatch()
        watch.arm()
        assert sorted(watch.pids.values()) == ["gcs_server", "raylet"] and other.pid not in watch.pids
        assert watch.poll() == []
        raylet.send_signal(signal.SIGKILL)
        found: list[Died] = []
        end = time.monotonic() + 10
        while len(found) < 2 and time.monotonic() < end:
            found += watch.poll()
            time.sleep(0.05)
        assert sorted(found, key=lambda d: d.daemon) == [
            Died("gcs_server", gcs.pid, "exited 3"),
            Died("raylet", raylet.pid, "killed by SIGKILL"),
        ]
        assert watch.pids == {} and watch.poll() == []  # each death once
    finally:
        for p in (raylet, gcs, other):
            p.kill()
            p.wait()


def test_a_daemons_own_fork_is_not_a_daemon(tmp_path: Path) -> None:
    """The raylet forks each worker, named "raylet" until it execs: a watch armed at that moment
    keeps the raylet only, and the fork's end (the worker's, later) is no death."""
    raylet = _daemon(tmp_path, "raylet", '"$0" -c "sleep 60" & sleep 60')
    try:
        end = time.monotonic() + 10
        forks: list[psutil.Process] = []
        while not forks and time.monotonic() < end:  # the background fork, once it has exec'd "$0"
            forks = [c for c in psutil.Process(raylet.pid).children() if _cmd(c)[-1:] == ["sleep 60"]]
            time.sleep(0.02)
        [fork] = forks  # not the foreground sleep's fork: it, too, is named "raylet" until it execs
        assert fork.name() == "raylet"
        watch = RayWatch()
        watch.arm()
        assert watch.pids == {raylet.pid: "raylet"}
        fork.kill()
        fork.wait(10)
        assert watch.due(time.monotonic()) == [] and watch.due(time.monotonic() + 5) == []
    finally:
        for p in psutil.Process(raylet.pid).children():
            p.kill()
        raylet.kill()
        raylet.wait()


def test_a_death_is_reported_only_after_a_moment(tmp_path: Path) -> None:
    raylet = _daemon(tmp_path, "raylet", "sleep 60")
    watch = RayWatch()
    watch.arm()
    raylet.kill()
    time.sleep(0.2)
    t0 = time.monotonic()
    assert watch.due(t0) == [] and len(watch.seen) == 1  # seen, held back
    assert watch.due(t0 + 0.1) == []
    assert watch.due(t0 + 0.6) == [Died("raylet", raylet.pid, "killed by SIGKILL")]
    assert watch.due(t0 + 5) == []
    raylet.wait()


def test_how_a_process_ended_reads_as_people_say_it() -> None:
    assert how_it_ended(signal.SIGTERM) == "killed by SIGTERM"  # a wait status: the signal's number
    assert how_it_ended(1 << 8) == "exited 1"
    assert os.WIFEXITED(0) and how_it_ended(0) == "exited 0"


def test_the_jobs_reason_names_the_ray_daemons_that_died_once() -> None:
    events = [
        {"event": "node_up", "node": "node1", "t": 1.0},
        {"event": "ray_died", "node": "node3", "daemon": "raylet", "how": "killed by SIGKILL", "t": 0.0},
    ]
    deaths = ray_deaths(events)
    assert deaths == [RayDeath("node3", "raylet", "killed by SIGKILL", 0.0)]
    said = with_ray_deaths("driver exited 1", deaths)
    assert said.startswith("driver exited 1; Ray died: node3's raylet (killed by SIGKILL) at ")
    assert with_ray_deaths(said, deaths) == said and with_ray_deaths("x", []) == "x"
