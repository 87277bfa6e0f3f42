"""The batch script's share of a job of parts: the node step's components (one per part with
nodes, core/parts.py's order: a task's rank tells its part), every one in the job's container;
and one step per part with an image of its own, in which its supervisor
(job/service_supervise.sh) runs that part's instances on its nodes (a sidecar's: its host part's),
so that image needs neither python nor slurm-rl."""

from __future__ import annotations

import shlex
from collections.abc import Callable
from pathlib import Path

from ...core.parts import Part, component_parts
from ...core.paths import JobPaths
from .plan import JobPlan

SUPERVISOR = JobPaths(Path("/J")).service_supervisor.relative_to("/J")


def part_nodes(parts: dict[str, Part]) -> list[int]:
    """Each heterogeneous component's node count, in component order."""
    return [parts[name].nodes for name in component_parts(parts)]


def image_steps(plan: JobPlan, workdir: str, words: Callable[[list[str]], list[str]]) -> list[dict]:
    """``[{group, nodes, flags, command}]``: per part with an image of its own, the step that
    runs its supervisor (``srun --overlap --het-group=GROUP``) in that image, by the job's
    container runtime; ``words`` shell-quotes argv items as the rest of the script does."""
    opts = plan.opts
    order = component_parts(opts.parts)
    out = []
    for name, own in plan.part_containers.items():
        part = opts.parts[name]
        host = part.sidecar_of or name
        count = 1 if part.sidecar_of else part.replicas_per_node
        flags, prefix = plan.runtime.launch(own, workdir)
        gpus = [f"--gpus-per-node={part.gpus_per_node}"] if part.gpus_per_node and not part.sidecar_of else []
        supervisor = f'bash "$SLURM_RL_JOB_DIR"/{SUPERVISOR} {shlex.quote(name)} {count}'
        out.append(
            {
                "part": name,
                "group": order.index(host),
                "nodes": opts.parts[host].nodes,
                "flags": words([*gpus, *flags]),
                "command": " ".join([*words(prefix), supervisor]),
            }
        )
    return out
