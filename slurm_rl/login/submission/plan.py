"""A submission resolved once, into what render, preflight and submit read: the spec and the
options, the job's container (its runtime, image, mounts and image cache), and each part's with
an image of its own; each container is what its runtime (slurm_rl/runtimes) is asked about.
Made once per submission (``resolve_plan``: the spec as the site allows it), and every stage
that reads a submission takes it as a required argument: what render and ``--dry-run`` print is
what submit stages."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

from ...config.spec import ClusterSpec
from ...core.errors import SlurmCommandError, UsageError
from ...core.manifest import Container
from ...core.options import JobOptions
from ...runtimes import runtime_of
from ...runtimes.base import Runtime
from ...slurm import SlurmClient


def container_mounts(spec: ClusterSpec) -> tuple[str, ...]:
    """The spec's mounts, then the fileroot (job dirs) and the node-local dir (Ray's temp dir:
    enroot's /tmp is a tmpfs in RAM), each at the same path, unless a spec mount provides it."""
    mounts = list(spec.mounts)
    targets = {m.split(":")[1] for m in mounts}
    for path in (spec.fileroot, spec.node_local_dir):
        if path not in targets:
            mounts.append(f"{path}:{path}")
            targets.add(path)
    return tuple(mounts)


def container_for(spec: ClusterSpec, opts: JobOptions) -> Container:
    image = opts.container_image or (spec.gpu_image if opts.gpus_per_node > 0 else spec.cpu_image)
    runtime = runtime_of(spec.container_runtime)
    return Container(
        runtime=runtime.name,
        image=image,
        workdir=opts.workdir,
        gpus=opts.gpus_per_node > 0,
        mounts=container_mounts(spec) if runtime.contained else (),
        cache_mb=runtime.cache_mb(spec, image or ""),
        scratch=spec.node_local_dir,
    )


@dataclass(frozen=True)
class JobPlan:
    spec: ClusterSpec
    opts: JobOptions
    container: Container  # the job's: every node's task runs in it
    part_containers: dict[str, Container] = field(default_factory=dict)  # parts with images of their own

    @property
    def runtime(self) -> Runtime:
        return runtime_of(self.container.runtime)

    def at_site(self, client: SlurmClient) -> JobPlan:
        """The plan as this site allows it (``site_runtime``); itself where nothing changed."""
        spec = site_runtime(self.spec, client)
        return self if spec is self.spec else plan_job(spec, self.opts)


def site_runtime(spec: ClusterSpec, client: SlurmClient) -> ClusterSpec:
    """The spec as this site allows it for its container runtime (Pyxis' container_scope=job
    turns the image cache off); said once, on stderr, where it changed."""
    return runtime_of(spec.container_runtime).preflight(spec, client)


def resolve_plan(spec: ClusterSpec, opts: JobOptions, client: SlurmClient) -> JobPlan:
    """The submission resolved once: the options, the site's facts (``at_site``), the runtime
    and the parts' containers. submit, a sweep, render and ``--dry-run`` all start here."""
    return plan_job(spec, opts).at_site(client)


def preview_plan(spec: ClusterSpec, opts: JobOptions, client: SlurmClient) -> JobPlan:
    """``resolve_plan`` for render and ``--dry-run``, which also run where no SLURM is installed
    (a laptop, a CI box): there the plan is the spec's as written, said once on stderr where the
    site's answer could have changed it."""
    plan = plan_job(spec, opts)
    try:
        return plan.at_site(client)
    except (UsageError, SlurmCommandError) as exc:  # no SLURM here, or no answer from it
        print(f"slurm-rl: {exc}; the script is the spec's as written (a site can change it)", file=sys.stderr)
        return plan


def plan_job(spec: ClusterSpec, opts: JobOptions) -> JobPlan:
    """The plan as the spec and options say, before the site is asked (pure)."""
    container = container_for(spec, opts)
    own = {
        name: container.model_copy(update={"image": part.image, "gpus": part.gpus_per_node > 0, "cache_mb": 0})
        for name, part in opts.parts.items()
        if part.has_own_image(container.image)
    }
    return JobPlan(spec, opts, container, own)
