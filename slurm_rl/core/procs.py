"""Find and stop the processes of one job on this node, and only those.

A process belongs to job J when it is positively marked: ``SLURM_RL_JOB_ID=J`` in its
environment (every bootstrap exports it, and Ray daemons and workers inherit it), or the job's
node-local temp dir in its command line (Ray daemons carry their session dir). Names are never
used: ``ray stop`` matches by name and so kills every job's Ray on a shared node. Nor another
user's process: what runs as an ordinary user (every job at a site) looks only at its own uid's
processes, whatever their command lines say (anyone may start a process whose argv names this
job's temp dir); root (a site's administrator cleaning up) looks at all.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from dataclasses import dataclass

import psutil

MARKER_ENV = "SLURM_RL_JOB_ID"
# A cleanup's own command line, and its launcher's (an srun, a timeout) on a node of the job,
# carries the job's temp dir but is never the job's: one of these words marks it.
CLEANUP_WORDS = frozenset({"slurm-rl-cleanup", "slurm_rl.job.cleanup"})


@dataclass(frozen=True)
class Killed:
    pid: int
    name: str
    signal: str  # "TERM" when SIGTERM sufficed, "KILL" otherwise


def _environ_marker(proc: psutil.Process) -> str | None:
    try:
        with open(f"/proc/{proc.pid}/environ", "rb") as f:
            data = f.read()
    except OSError:
        return None
    key = MARKER_ENV.encode() + b"="
    for item in data.split(b"\0"):
        if item.startswith(key):
            return item[len(key) :].decode(errors="replace")
    return None


def _inside(path: str, temp_dir: str) -> bool:
    return path == temp_dir or path.startswith(temp_dir + "/")


def same_user(proc: psutil.Process) -> bool:
    """Whether this (non-root) process may call ``proc`` its own: the same real uid."""
    euid = os.geteuid()
    if euid == 0:
        return True
    try:
        return proc.uids().real == euid
    except (psutil.Error, OSError):
        return False


def belongs_to_job(proc: psutil.Process, job_id: str, temp_dir: str | None) -> bool:
    """Positive evidence only: the marker variable, or the job's temp dir in the command line
    or among the open files (Ray daemons and agents keep their logs there open); never a
    cleanup's command or its launcher's (CLEANUP_WORDS), never another user's (unless root)."""
    if not same_user(proc):
        return False
    try:
        cmdline = proc.cmdline()
    except (psutil.Error, OSError):
        cmdline = []
    if CLEANUP_WORDS.intersection(cmdline):
        return False
    if _environ_marker(proc) == job_id:
        return True
    if not temp_dir:
        return False
    try:
        if any(_inside(arg, temp_dir) or f"{temp_dir}/" in arg for arg in cmdline):
            return True
        return any(_inside(f.path, temp_dir) for f in proc.open_files())
    except (psutil.Error, OSError):
        return False


def job_processes(job_id: str, temp_dir: str | None = None, exclude: Iterable[int] = ()) -> list[psutil.Process]:
    """Processes of ``job_id`` on this node (this PID namespace), minus ``exclude`` and us."""
    skip = {os.getpid(), *exclude}
    found = []
    for proc in psutil.process_iter(["pid", "name"]):
        if proc.pid in skip or proc.pid == 1:
            continue
        try:
            if belongs_to_job(proc, job_id, temp_dir):
                found.append(proc)
        except psutil.Error:
            continue
    return found


def _running(proc: psutil.Process) -> bool:
    """Alive and not a zombie: a process whose parent has not reaped it yet (a parent that is
    itself paused or being stopped) is dead for us; waiting on its pid would wait out the timeout."""
    try:
        return proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def wait_gone(procs: list[psutil.Process], timeout_s: float) -> list[psutil.Process]:
    """Wait (bounded) until every process has exited or is a zombie; returns those still running."""
    end = time.monotonic() + timeout_s
    alive = [p for p in procs if _running(p)]
    while alive and time.monotonic() < end:
        time.sleep(0.05)
        alive = [p for p in alive if _running(p)]
    return alive


def stop_processes(procs: list[psutil.Process], grace_s: float = 1.0) -> list[Killed]:
    """SIGTERM, wait up to ``grace_s``, then SIGKILL what is left. Returns what was stopped.

    ``grace_s`` is short on purpose: gcs_server and raylet ignore SIGTERM for seconds, and SLURM
    sends SIGKILL ``KillWait`` seconds after SIGTERM anyway.
    """
    names = {}
    for p in procs:
        try:
            names[p.pid] = p.name()
            p.terminate()
        except psutil.Error:
            pass
    alive = wait_gone(procs, grace_s)
    for p in alive:
        try:
            p.kill()
        except psutil.Error:
            pass
    wait_gone(alive, 2.0)
    alive_pids = {p.pid for p in alive}
    return [Killed(pid, name, "KILL" if pid in alive_pids else "TERM") for pid, name in names.items()]


def stop_job_processes(
    job_id: str,
    temp_dir: str | None,
    grace_s: float = 1.0,
    exclude: Iterable[int] = (),
    rounds: int = 3,
    also: Iterable[int] = (),
) -> list[Killed]:
    """Stop every process of the job here (plus the pids in ``also``, e.g. our descendants);
    repeat so that children forked or re-parented meanwhile go too."""
    killed: list[Killed] = []
    extra = set(also)
    for _ in range(rounds):
        procs = job_processes(job_id, temp_dir, exclude)
        seen = {p.pid for p in procs}
        for pid in extra - seen:
            try:
                procs.append(psutil.Process(pid))
            except psutil.Error:
                pass
        extra = set()
        if not procs:
            break
        killed += stop_processes(procs, grace_s)
        time.sleep(0.05)
    return killed
