"""Every node answers the job's stack requests (core/stacks.py): its bootstrap signals the
processes armed on this node (their dump files in the node's stacks directory) and writes what
they dumped, one answer per node, in a thread so that the node's loop never waits on it. Node 0
finds the requests in the job dir and passes them on through the head's GCS."""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

from ..core.stacks import DUMP_SIGNAL, HEADER, ProcessStack, header_fields, parse_dump, pending_requests, write_answer
from .board import BoardUnreachable
from .context import NodeContext

CHECK_S = 1.0  # how often a node looks for a new request (node 0: the job dir; the others: the GCS)
ANSWER_S = 3.0  # how long a process has to dump (faulthandler's handler takes milliseconds)


def _read(path: str) -> str:
    try:
        with open(path, "rb") as f:
            return f.read().decode(errors="replace")
    except OSError:
        return ""


def process_title(pid: int) -> str:
    """What `ps` shows: "ray::Trainer.step" for a Ray actor in a call, else the command line."""
    raw = _read(f"/proc/{pid}/cmdline").replace("\0", " ").strip()
    return raw.split("  ")[0].strip() if raw.startswith("ray::") else raw[:160]


def process_rank(pid: int) -> str:
    for item in _read(f"/proc/{pid}/environ").split("\0"):
        if item.startswith("RANK="):
            return item[5:]
    return ""


def capture(directory: str, node: str, answer_s: float = ANSWER_S) -> list[ProcessStack]:
    """Signal every live armed process of this node; their main threads' stacks."""
    armed: dict[int, tuple[str, int, dict[str, str]]] = {}  # pid -> (file, size before, header)
    try:
        names = os.listdir(directory)
    except OSError:
        return []
    for name in names:
        if not name.endswith(".txt") or not name[:-4].isdigit():
            continue
        path, pid = os.path.join(directory, name), int(name[:-4])
        if not os.path.exists(f"/proc/{pid}"):
            try:
                os.unlink(path)  # the process is gone: so is its dump file
            except OSError:
                pass
            continue
        text = _read(path)
        if not text.startswith(HEADER):
            continue
        armed[pid] = (path, len(text.encode()), header_fields(text.splitlines()[0]))
        try:
            os.kill(pid, DUMP_SIGNAL)
        except OSError:
            armed.pop(pid)
    sizes: dict[int, int] = {}
    deadline = time.monotonic() + answer_s
    while time.monotonic() < deadline:  # each dump written and no longer growing
        time.sleep(0.1)
        now = {pid: _size(path) for pid, (path, _, _) in armed.items()}
        if all(now[p] > armed[p][1] for p in armed) and now == sizes:
            break
        sizes = now
    out = []
    for pid, (path, before, header) in sorted(armed.items()):
        dumped = Path(path).read_bytes()[before:].decode(errors="replace") if _size(path) > before else ""
        main, others = parse_dump(dumped, header.get("main", ""))
        out.append(
            ProcessStack(
                node=node,
                pid=pid,
                role=header.get("role", "worker"),
                title=process_title(pid) or f"pid {pid}",
                rank=process_rank(pid),
                main=main,
                others=others,
                error="" if dumped else f"did not answer within {answer_s:g} s",
            )
        )
    return out


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


class StacksWatch:
    """Polled from every node's lifecycle loop. Node 0 reads the requests in the job dir and
    publishes them on the head's GCS board (key ``<attempt>/stacks``, the latest few); the other
    nodes read that key, never the shared job dir, while the job runs (job/board.py: a job dir on
    Lustre pays a metadata round trip per stat, on every node, every second). Each node answers
    the requests made since it started that name it (or every node), once, in a thread."""

    KEPT = 8  # requests kept on the board

    def __init__(self, ctx: NodeContext, directory: str) -> None:
        self.ctx, self.directory = ctx, directory
        self.since = time.time()
        self.answered: set[str] = set()
        self.published: list[dict[str, Any]] = []
        self._next = 0.0

    def poll(self) -> None:
        now = time.monotonic()
        if now < self._next:
            return
        self._next = now + CHECK_S
        for req in self._requests():
            rid, nodes = str(req["id"]), req.get("nodes")
            if rid in self.answered or (nodes and self.ctx.node not in nodes):
                continue
            self.answered.add(rid)
            native = bool(req.get("native"))
            threading.Thread(target=self._answer, args=(rid, native), name=f"stacks-{rid}", daemon=True).start()

    def _requests(self) -> list[dict[str, Any]]:
        board = self.ctx.board
        if self.ctx.rank == 0:
            found = pending_requests(self.ctx.paths.job_dir, self.since)
            if board is not None and [r["id"] for r in found[-self.KEPT :]] != [r["id"] for r in self.published]:
                self.published = found[-self.KEPT :]
                board.put("stacks", json.dumps(self.published))
            return found
        if board is None:  # not joined yet: no process of the job here to ask
            return []
        try:
            raw = board.get("stacks")
        except BoardUnreachable:
            return []
        return [r for r in json.loads(raw) if float(r.get("t", 0)) >= self.since] if raw else []

    def _answer(self, rid: str, native: bool) -> None:
        found = capture(self.directory, self.ctx.node)
        if native:
            for s in found:
                s.native = native_stack(s.pid)
        write_answer(self.ctx.paths.job_dir, rid, self.ctx.node, found)


def native_stack(pid: int) -> str:
    """py-spy's dump with native frames. The job's processes descend from this bootstrap (the
    driver; Ray's daemons and workers, of which it is the subreaper), so the kernel lets it
    trace them even under kernel.yama.ptrace_scope=1."""
    import shutil
    import subprocess

    # beside this interpreter (a venv's bin/ need not be on the node step's PATH), else on PATH
    spy = shutil.which("py-spy", path=os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")]))
    if spy is None:
        return "(py-spy is not installed on this node: pip install py-spy)"
    try:
        res = subprocess.run([spy, "dump", "--native", "--pid", str(pid)], capture_output=True, text=True, timeout=20)
    except subprocess.TimeoutExpired:
        return "(py-spy took over 20 s)"
    return (res.stdout if res.returncode == 0 else res.stderr).strip()
