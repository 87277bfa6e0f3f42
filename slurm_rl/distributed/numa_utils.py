"""NeMo RL 2026's ``nemo_rl.distributed.numa_utils``: pin a GPU worker's CPUs (and prefer its
memory) to the NUMA node its GPU hangs off, so host<->device copies stay on the local socket.

Where each GPU's CPUs are comes from an affinity file, one ``GPU:CPULIST`` line per GPU (``0:0-71``,
``2:72-143``), which every GPU node of a slurm-rl job writes at start (``write_affinity_file``:
``nvidia-smi topo -m``'s NUMA column, then the node's CPU list from sysfs) into its node-local
temp dir. Without it (a CPU node, no ``nvidia-smi``) binding is a logged no-op. Switches:
``NRL_DISABLE_NUMA_BINDING=1`` (nothing), ``NRL_DISABLE_NUMA_MEMBIND=1`` (CPUs only). Memory is
*preferred* on the local node, never hard-bound: a hard bind OOM-kills a worker whose node is full
while the other socket has free memory.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
import subprocess
from pathlib import Path

from ..core.events import write_atomic
from ..core.job_env import JobEnvironment

logger = logging.getLogger(__name__)

AFFINITY_FILE_NAME = "gpu_cpu_affinity.txt"
GPU_CPU_AFFINITY_PATH = os.environ.get(
    "NRL_GPU_CPU_AFFINITY_PATH", os.path.join(JobEnvironment.current().temp_dir or "/tmp", AFFINITY_FILE_NAME)
)
DISABLE_BINDING_ENV = "NRL_DISABLE_NUMA_BINDING"
DISABLE_MEMBIND_ENV = "NRL_DISABLE_NUMA_MEMBIND"


def _parse_cpulist(text: str) -> set[int]:
    """Linux's CPU list syntax (``0-3,8,10-11``) as a set of CPU ids."""
    cpus: set[int] = set()
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        low, _, high = part.partition("-")
        cpus.update(range(int(low), int(high or low) + 1))
    return cpus


def resolve_visible_gpu_id(local_index: int) -> int | None:
    """The physical GPU id of CUDA device ``local_index`` of this process (from
    ``CUDA_VISIBLE_DEVICES``); None when it cannot be known (unset, out of range, UUIDs)."""
    visible = [d.strip() for d in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if d.strip()]
    if not 0 <= local_index < len(visible) or not visible[local_index].isdigit():
        return None
    return int(visible[local_index])


def _load_libnuma() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("numa") or "libnuma.so.1"
    try:
        lib = ctypes.CDLL(name)
    except OSError:
        return None
    lib.numa_available.restype = ctypes.c_int
    return lib if lib.numa_available() >= 0 else None


def _get_numa_node(libnuma: ctypes.CDLL, cpus: set[int]) -> int:
    """The NUMA node of the lowest of ``cpus``."""
    libnuma.numa_node_of_cpu.argtypes = [ctypes.c_int]
    libnuma.numa_node_of_cpu.restype = ctypes.c_int
    return int(libnuma.numa_node_of_cpu(min(cpus)))


def _set_numa_membind(cpus: set[int]) -> bool:
    """Prefer memory on the NUMA node of ``cpus`` (MPOL_PREFERRED: spills over when full)."""
    if os.environ.get(DISABLE_MEMBIND_ENV) == "1" or not cpus:
        return False
    libnuma = _load_libnuma()
    if libnuma is None:
        return False
    node = _get_numa_node(libnuma, cpus)
    if node < 0:
        return False
    libnuma.numa_set_preferred.argtypes = [ctypes.c_int]
    libnuma.numa_set_preferred(node)
    return True


def read_affinity_file(path: str | os.PathLike[str]) -> dict[int, set[int]]:
    """{GPU id: CPU ids} from ``GPU:CPULIST`` lines; {} when the file is absent."""
    try:
        lines = Path(path).read_text().splitlines()
    except OSError:
        return {}
    out: dict[int, set[int]] = {}
    for line in lines:
        gpu, sep, cpus = line.partition(":")
        if sep and gpu.strip().isdigit():
            out[int(gpu)] = _parse_cpulist(cpus)
    return out


def bind_to_gpu_numa(gpu_id: int) -> bool:
    """Pin this process to the CPUs of GPU ``gpu_id``'s NUMA node (and prefer its memory).
    True when the CPUs were pinned; False, with a log line saying why, when not."""
    if os.environ.get(DISABLE_BINDING_ENV) == "1":
        return False
    table = read_affinity_file(GPU_CPU_AFFINITY_PATH)
    if not table:
        logger.info("NUMA binding skipped: no GPU affinity file at %s (not a GPU node?)", GPU_CPU_AFFINITY_PATH)
        return False
    cpus = table.get(gpu_id)
    if not cpus:
        logger.info("NUMA binding skipped: GPU %s is not in %s (GPUs %s)", gpu_id, GPU_CPU_AFFINITY_PATH, sorted(table))
        return False
    allowed = cpus & os.sched_getaffinity(0) or cpus
    try:
        os.sched_setaffinity(0, allowed)
    except OSError as exc:
        logger.warning("NUMA binding of GPU %s to CPUs %s failed: %s", gpu_id, sorted(allowed), exc)
        return False
    _set_numa_membind(allowed)
    return True


def topo_numa_nodes(topo_output: str) -> dict[int, int]:
    """{GPU id: NUMA node} from ``nvidia-smi topo -m``: the "NUMA Affinity" column, the one
    before last on each GPU row (its first node when it lists several, as on GB200)."""
    out: dict[int, int] = {}
    for line in topo_output.splitlines():
        parts = line.split()
        if not parts or not parts[0].startswith("GPU") or not parts[0][3:].isdigit() or len(parts) < 3:
            continue
        numa = parts[-2].split(",")[0].split("-")[0]
        if numa.isdigit():
            out[int(parts[0][3:])] = int(numa)
    return out


def write_affinity_file(path: str | os.PathLike[str], sysfs: str = "/sys/devices/system/node") -> int:
    """Write this node's ``GPU:CPULIST`` file (see the module doc); the number of GPUs in it
    (0, and no file, without ``nvidia-smi`` or NUMA information)."""
    try:
        topo = subprocess.run(["nvidia-smi", "topo", "-m"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return 0
    lines = []
    for gpu, node in sorted(topo_numa_nodes(topo).items()):
        try:
            cpus = Path(sysfs, f"node{node}", "cpulist").read_text().strip()
        except OSError:
            continue
        if cpus:
            lines.append(f"{gpu}:{cpus}")
    if lines:
        write_atomic(Path(path), "\n".join(lines) + "\n")
    return len(lines)
