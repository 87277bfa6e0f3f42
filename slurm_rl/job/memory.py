"""How much memory this node's Ray may plan with: what SLURM gave the job here, not the host's.

Ray sizes its `memory` resource and its object store from the memory it sees, which at a site
is the host's (Ray reads the top-level cgroup), while SLURM confines the job to its allocation
(a memory cgroup under `ConstrainRAMSpace`). On a 3-node job with 2,000 MB per node Ray
advertised ~16.5 GB of memory and ~7.1 GB of object store per node; the object store lives in
/dev/shm, which the cgroup charges to the job, so the job died as soon as the store filled.

The limit is the smallest of: SLURM_MEM_PER_NODE; SLURM_MEM_PER_CPU x SLURM_CPUS_ON_NODE; the
memory cgroup this process is in (v1 `memory.limit_in_bytes` or v2 `memory.max`, the tightest
of it and its parents). Ray then gets 30% of it for the object store (Ray's own proportion,
capped by /dev/shm) and `memory` = the rest minus a reserve for Ray's daemons.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from ..core.exits import OomKills
from ..core.job_env import JobEnvironment

MIB = 2**20
DAEMON_RESERVE = 400 * MIB  # raylet, GCS on the head, agents: what Ray's own processes hold
UNLIMITED = 2**60  # larger than any real limit (cgroup v1 says 9223372036854771712 for none)


@dataclass(frozen=True)
class MemoryLimit:
    bytes: int
    source: str  # where it came from, for the node log: "SLURM_MEM_PER_NODE=2000", "cgroup ..."


def slurm_limit(env: Mapping[str, str]) -> MemoryLimit | None:
    """What SLURM's environment says this node's share of the job is."""
    share = JobEnvironment.current(env).memory_share_mib()
    return MemoryLimit(share[0] * MIB, share[1]) if share else None


def memory_cgroup(proc_cgroup: str = "/proc/self/cgroup", root: str = "/sys/fs/cgroup") -> Path | None:
    """This process's memory cgroup directory (v1 `memory` controller, else the v2 unified one)."""
    try:
        lines = Path(proc_cgroup).read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(","):
            return Path(root, "memory", path.lstrip("/"))
    for line in lines:
        if line.startswith("0::"):
            return Path(root, line[3:].lstrip("/"))
    return None


def _levels(cgroup: Path | None, root: str) -> Iterator[Path]:
    """``cgroup`` and its parents, up to (not including) ``root``."""
    top = Path(root)
    node = cgroup
    while node is not None and node != top and top in node.parents:
        yield node
        node = node.parent


def cgroup_limit(cgroup: Path | None, root: str = "/sys/fs/cgroup") -> MemoryLimit | None:
    """The tightest memory limit of ``cgroup`` and its parents (below ``root``)."""
    best: MemoryLimit | None = None
    for node in _levels(cgroup, root):
        for name in ("memory.limit_in_bytes", "memory.max"):
            try:
                text = (node / name).read_text().strip()
            except OSError:
                continue
            value = UNLIMITED if text == "max" else int(text) if text.isdigit() else UNLIMITED
            if value < UNLIMITED and (best is None or value < best.bytes):
                best = MemoryLimit(value, f"memory cgroup {node}")
    return best


def node_memory_limit(
    env: Mapping[str, str] | None = None, cgroup: Path | None = None, root: str = "/sys/fs/cgroup"
) -> MemoryLimit | None:
    """The smallest of SLURM's allocation and the memory cgroup's limit; None if neither says."""
    env = os.environ if env is None else env
    where = cgroup if cgroup is not None else memory_cgroup(root=root)
    found = [m for m in (slurm_limit(env), cgroup_limit(where, root)) if m]
    return min(found, key=lambda m: m.bytes) if found else None


@dataclass(frozen=True)
class RayMemory:
    memory: int | None  # `ray start --memory`; None: Ray's own view (no limit known)
    object_store: int
    note: str  # for the node log


def ray_memory(limit: MemoryLimit | None, available: int, shm_free: int) -> tuple[RayMemory, str | None]:
    """Ray's `--memory` and `--object-store-memory` within ``limit`` (and /dev/shm), and a
    warning when /dev/shm is the tighter bound (see ray_start.object_store_size)."""
    from .ray_start import object_store_size

    usable = min(available, limit.bytes) if limit else available
    store, warning = object_store_size(usable, shm_free)
    if limit is None:
        return RayMemory(None, store, "no SLURM memory limit here: Ray sizes itself from the host"), warning
    memory = max(usable - store - DAEMON_RESERVE, 64 * MIB)
    note = (
        f"memory limit {limit.bytes // MIB} MiB ({limit.source}): Ray memory {memory // MIB} MiB, "
        f"object store {store // MIB} MiB, {DAEMON_RESERVE // MIB} MiB left for Ray's daemons"
    )
    return RayMemory(memory, store, note), warning


def oom_kills(cgroup: Path | None, root: str = "/sys/fs/cgroup") -> int:
    """Processes the kernel's OOM killer killed in ``cgroup`` and its parents (below ``root``):
    v1 ``memory.oom_control`` and v2 ``memory.events``, line ``oom_kill N``."""
    total = 0
    for node in _levels(cgroup, root):
        for name in ("memory.oom_control", "memory.events"):
            try:
                lines = (node / name).read_text().splitlines()
            except OSError:
                continue
            for line in lines:
                key, _, value = line.partition(" ")
                if key == "oom_kill" and value.strip().isdigit():
                    total += int(value)
        if (node / "memory.events").exists():
            break  # v2 counts its subtree's kills hierarchically: the leaf's count is the answer
    return total


class OomWatch:
    """Notices, at most every ``every_s``, that the OOM killer killed processes in this node's
    memory cgroup (a Ray worker over the job's limit dies as "SYSTEM_ERROR" otherwise)."""

    def __init__(
        self, limit: MemoryLimit | None, every_s: float = 2.0, cgroup: Path | None = None, root: str = "/sys/fs/cgroup"
    ) -> None:
        self._clock = time.monotonic
        self.root = root
        self.cgroup = cgroup if cgroup is not None else memory_cgroup(root=root)
        self.limit = limit
        self.every_s = every_s
        self.seen = oom_kills(self.cgroup, root)
        self._next = self._clock() + every_s

    def poll(self, now: bool = False) -> tuple[int, str] | None:
        """(new kills, the limit in words) when the OOM killer killed processes since the last
        poll, else None (``now``: look even if the last look was less than ``every_s`` ago)."""
        if self.cgroup is None or (self._clock() < self._next and not now):
            return None
        self._next = self._clock() + self.every_s
        kills = oom_kills(self.cgroup, self.root)
        new, self.seen = kills - self.seen, kills
        if new <= 0:
            return None
        return new, f"{self.limit.bytes // MIB} MiB ({self.limit.source})" if self.limit else "its memory limit"


def warn_driver(driver_log: Path, kills: OomKills) -> None:
    """A warning line in the driver's log (any node may write it: the job dir is shared), next to
    the error Ray gives the driver for a worker the kernel killed (``WorkerCrashedError``,
    ``SYSTEM_ERROR``, ``ActorDiedError``), which does not say memory. Nothing before the driver
    started (its log does not exist yet: the kill is in the node log and events)."""
    warn_driver_line(
        driver_log,
        f"slurm-rl: WARNING: OOM kill on {kills.node}: the kernel's OOM killer killed {kills.kills} process(es) "
        f"of the job at the node's limit of {kills.limit}; a Ray worker killed so surfaces as a crashed worker "
        f"or actor (WorkerCrashedError, SYSTEM_ERROR). Ask for more memory (--mem) or use less per node.",
    )


def warn_driver_line(driver_log: Path, line: str) -> None:
    """One line in the driver's log, once it exists (any node may write it: the job dir is shared)."""
    if not driver_log.exists():
        return
    with open(driver_log, "a") as f:  # one short append: whole lines among the driver's own
        f.write(line + "\n")
