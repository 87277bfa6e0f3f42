"""A job's Python stacks: how they are asked for, answered and shown (docs/rl.md "Stalls").

Mechanism (no ptrace): every process of the job that runs Python for it (the driver through
``init_ray``, every Ray worker and actor through the job's worker setup hook) arms
``faulthandler`` on SIGWINCH at its start, writing to its own file in the node's stacks
directory (``SLURM_RL_STACKS_DIR``, node-local). faulthandler's handler is C code that walks the
Python frames of every thread when the signal arrives, so it answers even while the process is
stuck in C (a collective, a lock, I/O). SIGWINCH, because its default action is to do nothing:
a process that did not arm it is not harmed. No process is traced, so Ubuntu's
``kernel.yama.ptrace_scope = 1`` and a non-root user change nothing.

A request is a file ``<job dir>/stacks/requests/<id>``; each node's bootstrap (job/stacks_watch.py)
signals its armed processes and answers with ``<job dir>/stacks/<id>/<node>.json``; the asker
(``slurm-rl stacks``, or node 0 when the job stalls) groups the answers (core/stacks_report.py)."""

from __future__ import annotations

import json
import os
import re
import secrets
import signal
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .events import write_atomic
from .job_env import STACKS_DIR_ENV  # noqa: F401 - importable here as before

DUMP_SIGNAL = signal.SIGWINCH
HEADER = "# slurm-rl stacks"  # first line of a dump file: "# slurm-rl stacks pid=12 main=0x7f.. role=worker"
_THREAD = re.compile(r"^(Current thread|Thread) (0x[0-9a-f]+)")
_FRAME = re.compile(r'^\s+File "(.*)", line (\d+) in (.*)$')


def arm(directory: str, role: str) -> None:
    """Arm this process's stack dump (idempotent; never raises). Self-contained (imports and
    literals inside): the worker setup hook carries it by value into Python environments
    without slurm_rl. The literals are HEADER's and DUMP_SIGNAL's."""
    import faulthandler as fh
    import os as os_
    import signal as sig
    import threading as th

    if not directory or getattr(fh, "_slurm_rl_armed", None):
        return
    try:
        os_.makedirs(directory, exist_ok=True)
        f = open(os_.path.join(directory, f"{os_.getpid()}.txt"), "w", buffering=1)  # noqa: SIM115 (kept open)
        f.write(f"# slurm-rl stacks pid={os_.getpid()} main=0x{th.main_thread().ident or 0:016x} role={role}\n")
        fh.register(sig.SIGWINCH, file=f, all_threads=True, chain=False)
        fh._slurm_rl_armed = f  # type: ignore[attr-defined]  # keeps the file open
    except (OSError, ValueError, RuntimeError):
        pass  # no stacks for this process; never a reason to fail it


@dataclass
class ProcessStack:
    """One process's answer: its main thread's frames, innermost first ("func (file:line)")."""

    node: str
    pid: int
    role: str  # driver, worker (a Ray worker or actor)
    title: str  # the process title: "ray::Trainer.step", "python3 experiment.py"
    rank: str = ""  # RANK of a worker-group worker
    main: list[str] = field(default_factory=list)
    others: int = 0  # other threads (not shown)
    error: str = ""  # why there is no stack ("did not answer within 3 s")
    native: str = ""  # py-spy's dump with native frames (`stacks --native`)


def parse_dump(text: str, main_ident: str) -> tuple[list[str], int]:
    """faulthandler's dump -> (the main thread's frames innermost first, number of other threads).
    Without the main thread's id, the last thread listed (the oldest: the main one)."""
    threads: list[tuple[str, list[str]]] = []
    for line in text.splitlines():
        m = _THREAD.match(line)
        if m:
            threads.append((m.group(2), []))
            continue
        f = _FRAME.match(line)
        if f and threads:
            threads[-1][1].append(f"{f.group(3)} ({short_path(f.group(1))}:{f.group(2)})")
    if not threads:
        return [], 0
    main = next((frames for ident, frames in threads if int(ident, 16) == int(main_ident or "0", 16)), None)
    return without_fork_server(main if main is not None else threads[-1][1]), len(threads) - 1


# A Ray process forked by the node's fork server (distributed/worker_env/fork_server.py) has the
# server's frames and runpy's outside its own entry point; an exec'd one starts at that entry
# point. Both show the same stack (one group in the report, neither "differs from its peers").
_FORK_SERVER_FRAME = re.compile(r"\((.*/)?worker_env/fork_server\.py:\d+\)$")
_RUNPY_FRAME = re.compile(r"\(((.*/)?runpy\.py|<frozen runpy>):\d+\)$")  # frozen since Python 3.11


def without_fork_server(frames: list[str]) -> list[str]:
    """FRAMES (innermost first) without the fork server's outermost ones and runpy's between."""
    if not frames or not _FORK_SERVER_FRAME.search(frames[-1]):
        return frames
    end = len(frames)
    while end and (_FORK_SERVER_FRAME.search(frames[end - 1]) or _RUNPY_FRAME.search(frames[end - 1])):
        end -= 1
    return frames[:end]


def short_path(path: str) -> str:
    """site-packages/ray/_private/worker.py -> ray/_private/worker.py; others as they are."""
    for mark in ("site-packages/", "dist-packages/"):
        if mark in path:
            return path.split(mark, 1)[1]
    return path


def header_fields(line: str) -> dict[str, str]:
    return dict(part.split("=", 1) for part in line[len(HEADER) :].split() if "=" in part)


# ---- requests and answers in the job dir --------------------------------------------------------
def stacks_root(job_dir: Path) -> Path:
    return job_dir / "stacks"


def request(job_dir: Path, by: str, nodes: list[str] | None = None, native: bool = False) -> str:
    """Ask the job's nodes (all, or ``nodes``) for their stacks; returns the request's id."""
    rid = time.strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(2)
    path = stacks_root(job_dir) / "requests" / rid
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, json.dumps({"id": rid, "t": time.time(), "by": by, "nodes": nodes, "native": native}) + "\n")
    return rid


def pending_requests(job_dir: Path, since: float) -> list[dict[str, Any]]:
    """The requests made at or after ``since`` (epoch seconds), oldest first."""
    folder = stacks_root(job_dir) / "requests"
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    out = []
    for name in names:
        try:
            req = json.loads((folder / name).read_text())
            t = float(req["t"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if t >= since:
            out.append({**req, "id": name})
    return sorted(out, key=lambda r: float(r["t"]))  # two in one second: their ids sort at random


def answer_path(job_dir: Path, rid: str, node: str) -> Path:
    return stacks_root(job_dir) / rid / f"{node}.json"


def write_answer(job_dir: Path, rid: str, node: str, stacks: list[ProcessStack]) -> None:
    path = answer_path(job_dir, rid, node)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, json.dumps([asdict(s) for s in stacks]) + "\n")


def read_answers(job_dir: Path, rid: str) -> dict[str, list[ProcessStack]]:
    """Each node's answer to request ``rid`` so far."""
    out: dict[str, list[ProcessStack]] = {}
    folder = stacks_root(job_dir) / rid
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            out[path.stem] = [ProcessStack(**s) for s in json.loads(path.read_text())]
        except (OSError, ValueError, TypeError):
            continue
    return out


def report_path(job_dir: Path, rid: str) -> Path:
    return stacks_root(job_dir) / rid / "stacks.txt"


def kept(job_dir: Path) -> list[Path]:
    """The reports this job kept, oldest first."""
    root = stacks_root(job_dir)
    return sorted(root.glob("*/stacks.txt")) if root.is_dir() else []


# ---- NCCL's own evidence of a hang ----------------------------------------------------------------
def nccl_evidence_env(job_dir: Path) -> dict[str, str]:
    """What torch's NCCL process groups need to leave their own record of a hung collective in
    the job dir (set by each node's bootstrap; a value the user set wins):
    TORCH_NCCL_TRACE_BUFFER_SIZE turns on the flight recorder (the last N collectives of every
    rank: which one each rank entered, with sizes and sequence numbers; 0, torch's default, is
    off); TORCH_NCCL_DUMP_ON_TIMEOUT makes the watchdog write it when a collective times out;
    TORCH_NCCL_DEBUG_INFO_TEMP_FILE is where (the rank is appended to the prefix). The
    watchdog's own timeout is the process group's ``timeout`` (init_process_group), not a
    variable."""
    return {
        "TORCH_NCCL_TRACE_BUFFER_SIZE": "2000",
        "TORCH_NCCL_DUMP_ON_TIMEOUT": "1",
        "TORCH_NCCL_DEBUG_INFO_TEMP_FILE": str(job_dir / "nccl" / "flight_recorder_rank_"),
    }
