"""Before the queue, for a job of parts (--parts): each part's partition exists and can hold it
(nodes, CPUs, GPUs and memory per node, the time limit), and each part's image can work under
the spec's container runtime. One exit-2 line per problem, naming the part and the fix."""

from __future__ import annotations

import os

from ...config.spec import ClusterSpec
from ...core.errors import UsageError
from ...core.fields import memory_mb, time_minutes
from ...core.options import JobOptions
from ...core.parts import component_parts
from ...runtimes import RUNTIMES, runtime_of
from ...slurm import SlurmClient


def check_part_images(spec: ClusterSpec, opts: JobOptions) -> None:
    runtime = runtime_of(spec.container_runtime)
    for name, part in opts.parts.items():
        if part.image and not runtime.contained:
            contained = ", ".join(n for n, r in RUNTIMES.items() if r.contained)
            raise UsageError(
                f"--parts {opts.parts_file}: part {name!r}: image {part.image!r}: the spec's container_runtime "
                f"is {spec.container_runtime!r} (no containers); set it to one of {contained}, or drop the image"
            )
        if part.image and part.is_ray:
            raise UsageError(
                f"--parts {opts.parts_file}: part {name!r}: image {part.image!r}: a Ray part runs in the job's "
                f"image (the spec's, or --container-image); give images to service parts"
            )
        if part.image and part.image.startswith("/") and not os.path.exists(part.image):
            raise UsageError(
                f"--parts {opts.parts_file}: part {name!r}: image {part.image!r}: it does not exist here; give the "
                f"path of an image file the nodes share, or a registry image"
            )


def check_parts_fit(opts: JobOptions, client: SlurmClient) -> None:
    for name in component_parts(opts.parts):
        part = opts.parts[name]
        where = f"--parts {opts.parts_file}: part {name!r}"
        found = client.partition_nodes(part.partition)
        if found is None:
            if part.partition:
                raise UsageError(
                    f"{where}: partition {part.partition!r}: SLURM has no such partition; `sinfo -s` lists them"
                )
            continue
        pname, count = found
        if part.nodes > count:
            raise UsageError(f"{where}: nodes {part.nodes}: partition {pname!r} has {count}; ask for fewer")
        capacity = client.partition_capacity(part.partition)
        if capacity is not None:
            cpus, mem_mb, gpus = capacity
            largest = f"partition {pname}'s largest node"
            if part.gpus_per_node > gpus:
                raise UsageError(
                    f"{where}: gpus_per_node {part.gpus_per_node}: {largest} has {gpus}; ask for at most {gpus}"
                )
            if part.mem and mem_mb and memory_mb(part.mem) > mem_mb:
                raise UsageError(f"{where}: mem {part.mem}: {largest} has {mem_mb} MB; ask for at most {mem_mb}M")
            if part.cpus_per_node and part.cpus_per_node > cpus:
                raise UsageError(
                    f"{where}: cpus_per_node {part.cpus_per_node}: {largest} has {cpus}; ask for at most {cpus}"
                )
        if opts.time:
            limit = client.partition_time_limit(part.partition)
            if limit is not None and time_minutes(opts.time) > time_minutes(limit):
                raise UsageError(f"--time {opts.time}: part {name!r}'s partition {pname} allows at most {limit}")
