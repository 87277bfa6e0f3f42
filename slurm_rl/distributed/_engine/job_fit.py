"""Does a virtual cluster fit the SLURM job it runs in? In a slurm-rl job the Ray cluster is the
allocation: once every node of the job is up and nothing can still join (no node of the job
still starting, no member or replacement job pending), a shortfall will not go away by waiting.
Then the retries (63 s by default) only delay the answer, so this says it at once: what the job
has, what the cluster asks, and the flags that would make it fit.

Outside a slurm-rl job (a local Ray, an external or autoscaling cluster) nothing here applies:
the caller keeps NeMo RL's retries."""

from __future__ import annotations

from dataclasses import dataclass

from ...core.events import read_events
from ...core.job_env import JobEnvironment
from ...core.manifest import JobManifest, load_manifest
from ...core.members import member_jobs
from ...core.paths import JobPaths
from .topology import ResourceInsufficientError

PENDING_MEMBER_STATES = ("requested", "submitted")


class JobTooSmallError(ResourceInsufficientError):
    """The job's allocation cannot hold the virtual cluster, and cannot grow: no retry helps."""


@dataclass(frozen=True)
class NodeShape:
    cpus: float
    gpus: float


def _job_manifest(env: JobEnvironment) -> JobManifest | None:
    if not env.job_dir or not env.job_id or env.external_ray:
        return None
    try:
        return load_manifest(JobPaths(env.job_dir).manifest)
    except Exception:  # noqa: BLE001 - no readable manifest: not a job this can judge
        return None


def _job_nodes() -> list[NodeShape]:
    """The job's alive Ray nodes (those slurm-rl tagged), with their CPUs and GPUs."""
    import ray

    from .ray_init import SLURM_MANAGED_RESOURCE

    return [
        NodeShape(float(n["Resources"].get("CPU", 0)), float(n["Resources"].get("GPU", 0)))
        for n in ray.nodes()
        if n.get("Alive") and SLURM_MANAGED_RESOURCE in n.get("Resources", {})
    ]


def _may_grow(manifest: JobManifest, nodes: list[NodeShape], env: JobEnvironment) -> bool:
    """Nodes of the job still joining (or lost and being replaced), or a member job pending."""
    if len(nodes) < manifest.total_nodes:
        return True
    events = read_events(JobPaths(env.job_dir).events) if env.job_dir else []
    return any(m.get("state") in PENDING_MEMBER_STATES for m in member_jobs(events))


def _hosts(nodes: list[NodeShape], gpus: int) -> list[NodeShape]:
    """The nodes that could hold ``gpus`` GPUs (all nodes when none are asked)."""
    return [n for n in nodes if n.gpus >= gpus]


def shortfall(
    counts: list[int], colocated: int, use_gpus: bool, nodes: list[NodeShape], unified: bool = False
) -> list[str]:
    """What the cluster asks that these nodes cannot give, one phrase each ([] if it fits).
    Each logical node's bundles must fit together on one node (a per-node placement group is
    STRICT_PACK; a unified one may spread); all bundles together must fit in the job's totals."""
    if not nodes:
        return []
    most = 0 if unified else max(counts, default=0)
    cpus, gpus = most * colocated, most if use_gpus else 0
    out = []
    if most and not any(n.cpus >= cpus and n.gpus >= gpus for n in nodes):
        hosts = _hosts(nodes, gpus)
        if not hosts:
            out.append(f"{gpus:g} GPUs on one node (its nodes have {max(n.gpus for n in nodes):g})")
        else:
            where = f"a node with {gpus:g} GPUs" if gpus else "one node"
            out.append(f"{cpus:g} CPUs on {where} (its nodes have {max(n.cpus for n in hosts):g})")
    total_cpu, total_gpu = sum(n.cpus for n in nodes), sum(n.gpus for n in nodes)
    if sum(counts) * colocated > total_cpu and not out:
        out.append(f"{sum(counts) * colocated:g} CPUs in all (the job has {total_cpu:g})")
    if use_gpus and sum(counts) > total_gpu and not any("GPU" in p for p in out):
        out.append(f"{sum(counts):g} GPUs in all (the job has {total_gpu:g})")
    return out


def fix_flags(counts: list[int], colocated: int, use_gpus: bool, nodes: list[NodeShape]) -> str:
    """The submit flags that would make the cluster fit: a per-node size where no node is big
    enough for a logical node, then the node count the totals need at that size (a lower bound
    where groups pack unevenly). A CPU-only head (0 GPUs) does not make GPUs look short."""
    most = max(counts, default=0)
    gpus = most if use_gpus else 0
    max_gpu = int(max(n.gpus for n in nodes))
    hosts = _hosts(nodes, gpus) or [n for n in nodes if n.gpus == max_gpu]
    have_cpu = int(max(n.cpus for n in hosts))
    cpn, gpn = max(most * colocated, have_cpu, 1), max(gpus, max_gpu)
    flags = [f"--cpus-per-node {cpn}"] if cpn > have_cpu else []
    if gpn > max_gpu:
        flags.append(f"--gpus-per-node {gpn}")
    need_nodes = max(len(nodes), -(-sum(counts) * colocated // cpn))
    if use_gpus and gpn:
        need_nodes = max(need_nodes, -(-sum(counts) // gpn))
    if need_nodes > len(nodes):
        flags.append(f"--nodes {need_nodes}")
    return " ".join(flags)


def check(counts: list[int], colocated: int, use_gpus: bool, unified: bool = False) -> None:
    """JobTooSmallError when this process is a slurm-rl job's driver whose allocation is complete
    and cannot hold ``counts`` bundles; else nothing (the caller's retries decide)."""
    env = JobEnvironment.current()
    manifest = _job_manifest(env)
    if manifest is None:
        return
    nodes = _job_nodes()
    short = shortfall(counts, colocated, use_gpus, nodes, unified)
    if not short or _may_grow(manifest, nodes, env):
        return
    cpus = sorted({n.cpus for n in nodes})
    gpus = sorted({n.gpus for n in nodes})
    has = (
        f"{len(nodes)} node{'s' if len(nodes) != 1 else ''} of "
        f"{'/'.join(f'{c:g}' for c in cpus)} CPUs and {'/'.join(f'{g:g}' for g in gpus)} GPUs"
    )
    asks = _describe(counts, colocated, use_gpus)
    per_node = [1] * sum(counts) if unified else counts  # a unified group's bundles may go anywhere
    raise JobTooSmallError(
        f"job {env.job_id} has {has}; RayVirtualCluster({counts}) asks {asks}, so it needs "
        f"{'; '.join(short)}: resubmit with {fix_flags(per_node, colocated, use_gpus, nodes)} "
        f"(or ask for fewer bundles)"
    )


def _describe(counts: list[int], colocated: int, use_gpus: bool) -> str:
    per = f"{colocated} CPU{'s' if colocated != 1 else ''}" + (" and 1 GPU" if use_gpus else "")
    return f"{sum(counts)} bundle{'s' if sum(counts) != 1 else ''} of {per}"
