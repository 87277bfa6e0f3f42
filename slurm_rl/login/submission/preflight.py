"""Before the queue: what would make a job fail, or pend forever, and can be known on the login
node. Each refusal is one exit-2 line naming the flag or spec field, what the site reported and
the fix; nothing is submitted.

- SLURM's limits (``sinfo``, one call): nodes per partition; CPUs, memory and GPUs of its
  largest node; its time limit. What sbatch itself refuses (an unknown account or QOS, a QOS a
  partition does not allow) comes back as sbatch's reason (``submit.sbatch_refusal``).
- Paths every node needs (the interpreter, the working directory, container mounts and image),
  where the login node sees what the nodes see: the path is on the fileroot's filesystem
  (shared by definition: job dirs live there) or on a network filesystem, and not under the
  node-local dir. Elsewhere (a node's own disk) the node script names a missing interpreter as
  the job's exit reason.
"""

from __future__ import annotations

import math
import os
import sys
from pathlib import Path

from ...config.spec import ClusterSpec
from ...core.errors import UsageError
from ...core.fields import memory_mb, time_minutes
from ...core.options import JobOptions
from ...runtimes import runtime_of
from ...slurm import SlurmClient
from .plan import JobPlan

# Filesystems that every node mounts alike at a site (whatever the fileroot is).
NETWORK_FS = {"nfs", "nfs4", "lustre", "gpfs", "beegfs", "cifs", "smb3", "ceph", "fuse.sshfs", "wekafs", "9p"}


def preflight(plan: JobPlan, client: SlurmClient) -> None:
    """Every check below of the submission ``plan``, cheapest first."""
    spec, opts = plan.spec, plan.opts
    check_node_paths(plan)
    check_slurm_version(opts, client)
    if opts.parts:  # each part its partition, its size, its image
        from .parts_preflight import check_part_images, check_parts_fit

        check_part_images(spec, opts)
        check_parts_fit(opts, client)
    else:
        check_partition_size(opts, client)
        check_node_capacity(opts, client)
        check_time_limit(opts, client)
    check_qos(opts, client)


# ---- SLURM's limits ------------------------------------------------------------------------------
def check_slurm_version(opts: JobOptions, client: SlurmClient) -> None:
    """Refuse a SLURM older than slurm-rl supports, and what this one does not have."""
    version = client.version()
    if opts.segment and not version.segments:
        raise UsageError(
            f"--segment {opts.segment}: SLURM {version} has no segments (23.11 and later, with "
            f"TopologyPlugin=topology/block); drop --segment"
        )


def check_partition_size(opts: JobOptions, client: SlurmClient) -> None:
    """Refuse a job that can never start (it would pend forever): more nodes than the partition has."""
    wanted = [("--partition", opts.partition, opts.nodes if opts.head_partition else opts.total_nodes)]
    if opts.head_partition:
        wanted.append(("--head-partition", opts.head_partition, 1))
    for flag, partition, nodes in wanted:
        found = client.partition_nodes(partition)
        if found is None:
            if partition:
                raise UsageError(f"{flag} {partition!r}: SLURM has no such partition; `sinfo -s` lists them")
            continue
        name, count = found
        if nodes > count:
            extra = " (--nodes workers plus the --head-node cpu head)" if nodes != opts.nodes else ""
            raise UsageError(
                f"--nodes {opts.nodes}: partition {name!r} has {count} node{'s' * (count != 1)}, "
                f"the job needs {nodes}{extra}; ask for fewer"
            )


def check_node_capacity(opts: JobOptions, client: SlurmClient) -> None:
    """Refuse what no node of the partition has (it would pend forever, or fail after the wait):
    more CPUs, GPUs or memory per node than its largest node."""
    capacity = client.partition_capacity(opts.partition)
    if capacity is None:
        return
    cpus, mem_mb, gpus = capacity
    where = f"partition {opts.partition or '(default)'}'s largest node"
    if opts.cpus_per_node and opts.cpus_per_node > cpus:
        raise UsageError(f"--cpus-per-node {opts.cpus_per_node}: {where} has {cpus} CPUs; ask for at most {cpus}")
    if opts.gpus_per_node and opts.gpus_per_node > gpus:
        raise UsageError(f"--gpus-per-node {opts.gpus_per_node}: {where} has {gpus} GPUs; ask for at most {gpus}")
    if opts.mem and mem_mb and memory_mb(opts.mem) > mem_mb:
        raise UsageError(f"--mem {opts.mem}: {where} has {mem_mb} MB; ask for at most {mem_mb}M")
    if opts.mem_per_cpu and mem_mb:
        per_node = memory_mb(opts.mem_per_cpu) * (opts.cpus_per_node or 1)
        if per_node > mem_mb:
            most = int(mem_mb / (opts.cpus_per_node or 1))
            raise UsageError(
                f"--mem-per-cpu {opts.mem_per_cpu}: {opts.cpus_per_node or 1} CPU(s) per node need "
                f"{per_node:g} MB, {where} has {mem_mb} MB; ask for at most {most}M per CPU"
            )


def _said(time: str) -> str:
    return f"{time} (no limit)" if math.isinf(time_minutes(time)) else time


def check_time_limit(opts: JobOptions, client: SlurmClient) -> None:
    """A time limit over the partition's MaxTime pends forever (PartitionTimeLimit) where the
    site does not enforce partition limits at submit, and is refused after the wait where it does."""
    if not opts.time:
        return
    limit = client.partition_time_limit(opts.partition)
    if limit is not None and time_minutes(opts.time) > time_minutes(limit):
        raise UsageError(
            f"--time {_said(opts.time)}: partition {opts.partition or '(default)'} allows at most {limit} "
            f"(sinfo's time limit); ask for at most that, or choose another partition"
        )


def check_qos(opts: JobOptions, client: SlurmClient) -> None:
    """The job's QOS limits (sacctmgr): a job over them pends forever (QOSMax*Limit) unless the
    QOS denies it at submit; either way it is refused here, naming the limit."""
    if not opts.qos:
        return
    limits = client.qos_limits(opts.qos)
    if limits is None:
        return
    where = f"QOS {opts.qos}"
    if opts.time and limits.max_wall and time_minutes(opts.time) > time_minutes(limits.max_wall):
        raise UsageError(f"--time {_said(opts.time)}: {where} allows at most {limits.max_wall} per job (MaxWall)")
    cpus, gpus = opts.cpus_per_node or 0, opts.gpus_per_node
    per_job = {"node": ("--nodes", opts.total_nodes), "cpu": ("--cpus-per-node", cpus * opts.total_nodes)}
    per_job["gres/gpu"] = ("--gpus-per-node", gpus * opts.nodes)
    for tres, (flag, asked) in per_job.items():
        most = limits.per_job.get(tres)
        if most is not None and asked > most:
            raise UsageError(
                f"{flag}: the job needs {asked} {tres} in all, {where} allows at most {most} per job "
                f"(MaxTRESPerJob {tres}={most}); ask for less, or use another QOS"
            )
    for tres, (flag, asked) in {"cpu": ("--cpus-per-node", cpus), "gres/gpu": ("--gpus-per-node", gpus)}.items():
        most = limits.per_node.get(tres)
        if most is not None and asked > most:
            raise UsageError(f"{flag} {asked}: {where} allows at most {most} {tres} per node (MaxTRESPerNode)")


# ---- paths the nodes need ------------------------------------------------------------------------
def _existing(path: Path) -> Path:
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def _fstype(path: Path) -> str:
    """The filesystem type of the mount holding ``path`` (/proc/mounts; '' where unknown)."""
    best, kind = "", ""
    try:
        lines = Path("/proc/mounts").read_text().splitlines()
    except OSError:
        return ""
    real = os.path.realpath(path)
    for line in lines:
        parts = line.split()
        if len(parts) < 3:
            continue
        point = parts[1].replace("\\040", " ")
        if (real == point or real.startswith(point.rstrip("/") + "/")) and len(point) >= len(best):
            best, kind = point, parts[2]
    return kind


def seen_alike(path: Path, spec: ClusterSpec) -> bool:
    """Whether the nodes see ``path`` as this login node does (see the module's docstring)."""
    local = os.path.normpath(spec.node_local_dir)
    if str(path) == local or str(path).startswith(local.rstrip("/") + "/"):
        return False
    here = _existing(path)
    try:
        if here.stat().st_dev == _existing(Path(spec.fileroot)).stat().st_dev:
            return True
    except OSError:
        return False
    return _fstype(here) in NETWORK_FS


def check_node_paths(plan: JobPlan) -> None:
    """Refuse a path that every node needs and that does not exist where the login node can
    tell: the job would fail on every node after the queue wait."""
    spec, opts, container = plan.spec, plan.opts, plan.container
    bare = not runtime_of(container.runtime).contained
    if bare and os.path.isabs(opts.python):
        python = Path(opts.python)
        if not os.access(python, os.X_OK) and seen_alike(python, spec):
            what = "not executable" if python.exists() else "no such file"
            raise UsageError(
                f'python {opts.python} (the spec\'s "python"): {what} here, and the nodes see that filesystem '
                f'as this login node does; set "python" in the spec to an interpreter with slurm_rl installed '
                f"(this one is {sys.executable})"
            )
    if bare and opts.workdir and not Path(opts.workdir).is_dir() and seen_alike(Path(opts.workdir), spec):
        raise UsageError(f"--workdir {opts.workdir}: no such directory; create it or choose another")
    fileroot = Path(os.path.normpath(spec.fileroot))
    for mount in container.mounts if not bare else ():
        source = Path(os.path.normpath(mount.split(":")[0]))
        made_here = source == fileroot or source in fileroot.parents  # submit makes the fileroot first
        if source.is_absolute() and not source.exists() and not made_here and seen_alike(source, spec):
            raise UsageError(
                f"default_mount {mount}: {source} does not exist, and the nodes see that filesystem as this "
                f"login node does; create it or remove the mount from the spec"
            )
    image = container.image or ""
    if not bare and image.startswith(("/", "./", "../")):
        path = Path(image.split("#")[0])
        if not path.is_file() and seen_alike(path.resolve(), spec):
            which = "--container-image" if opts.container_image else "gpu_image" if opts.gpus_per_node else "cpu_image"
            raise UsageError(f"{which} {image}: no such file; give the path of a squashfs image, or a registry image")
