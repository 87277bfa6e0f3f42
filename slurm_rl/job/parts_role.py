"""Which role a node's task plays (a job of parts adds two): node 0 the head and the driver, a
Ray part's other nodes Ray workers, each with its part's sidecars beside it, and a service
part's nodes their service's instances (service_instances.py), without Ray."""

from __future__ import annotations

import threading

from ..core.job_env import JobEnvironment
from ..core.parts import shared_ray_node, sidecars_of
from .context import NodeContext, NodeFailure
from .head import run_head
from .service_instances import ServiceRunner, run_service
from .worker import run_worker


def run_node_role(ctx: NodeContext) -> int:
    parts = ctx.manifest.parts
    if ctx.part and parts[ctx.part].is_service:
        return run_service(ctx)
    if ctx.part:
        shared = shared_ray_node(parts, JobEnvironment.current().component_nodes())
        if shared and f" on {ctx.node}," in shared:
            raise NodeFailure(shared)
        for name in sidecars_of(parts, ctx.part):
            threading.Thread(target=run_sidecar, args=(ctx, name), name=f"sidecar-{name}", daemon=True).start()
    return run_head(ctx) if ctx.rank == 0 else run_worker(ctx)


def run_sidecar(ctx: NodeContext, name: str) -> None:
    """One instance of a sidecar service on this node of its host part, until the job stops (or
    the node's cleanup, which stops every process the bootstrap started)."""
    runner = ServiceRunner(ctx, name, 1, [])
    ctx.say(f"sidecar {name} on port {runner.instances[0].port}")
    runner.run(ctx)
