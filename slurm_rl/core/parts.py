"""A job's parts (``submit --parts FILE``): the schema of the parts file and its checks.

A parts file (YAML or JSON) maps a part's name to its shape. A **Ray part** (no ``service``)
joins the job's one Ray cluster: each of its nodes carries the Ray resource ``part:NAME``. A
**service part** runs a command, ``replicas_per_node`` instances on each of its nodes, or, with
``sidecar_of``, one instance on every node of another part. Every check here is about the file
alone; what the site has (partitions, GPUs per node) is preflight's (login/parts_plan.py). A
problem is one line naming the part, the key and the fix (UsageError, exit 2).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from .errors import UsageError
from .fields import SlurmMemory, SlurmName

PART_NAME = re.compile(r"^[a-z][a-z0-9_]{0,30}$")
READY = re.compile(r"^(tcp|http:/\S*)$")
PORT_FIELD = "{port}"
PART_RESOURCE_PREFIX = "part:"  # each node of a Ray part: Ray resource "part:NAME" = 1


class Part(BaseModel):
    """One part of a job: its nodes and what runs on them."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    nodes: int = Field(default=0, ge=0)
    partition: SlurmName | None = None  # None: the job's (the spec's partition)
    gpus_per_node: int = Field(default=0, ge=0)
    cpus_per_node: int | None = Field(default=None, ge=1)  # None: the job's --cpus-per-node
    mem: SlurmMemory | None = None  # None: the job's --mem
    exclusive: bool = False
    image: str | None = None
    service: str | None = None  # the command of a service part; {port} is each instance's port
    replicas_per_node: int = Field(default=1, ge=1)
    ready: str = "tcp"  # "tcp": the port accepts; "http:/PATH": GET answers 2xx
    ready_timeout_s: float = Field(default=300.0, gt=0)
    restarts: int = Field(default=0, ge=0)  # an instance that exits is started again this often
    required: bool = True  # past its restarts, a required service ends the job
    sidecar_of: str | None = None
    isolated: bool | None = None  # None: isolated when the part has an image of its own
    env: dict[str, str] = Field(default_factory=dict)

    @field_validator("ready")
    @classmethod
    def _ready(cls, v: str) -> str:
        if not READY.match(v):
            raise ValueError('use "tcp" or "http:/PATH" (e.g. "http:/health")')
        return v

    @property
    def is_service(self) -> bool:
        return self.service is not None

    @property
    def is_ray(self) -> bool:
        return self.service is None

    @property
    def instances_per_node(self) -> int:
        return self.replicas_per_node if self.is_service else 0

    @property
    def gpus_per_instance(self) -> int:
        return self.gpus_per_node // self.replicas_per_node if self.is_service else 0

    def has_own_image(self, job_image: str | None) -> bool:
        """Its instances run in an image other than the job's."""
        return bool(self.image) and self.image != job_image

    def is_isolated(self, job_image: str | None) -> bool:
        return self.isolated if self.isolated is not None else self.has_own_image(job_image)


FIXES = {
    "nodes": "give a node count >= 1 (a sidecar takes its host part's nodes: no nodes)",
    "partition": "use a partition name from `sinfo -s`",
    "gpus_per_node": "use an integer >= 0",
    "cpus_per_node": "use an integer >= 1",
    "mem": 'use a SLURM memory size per node, e.g. "64G"',
    "replicas_per_node": "use an integer >= 1",
    "ready": 'use "tcp" or "http:/PATH" (e.g. "http:/health")',
    "ready_timeout_s": "use seconds > 0",
    "restarts": "use an integer >= 0",
    "env": 'use an object of {"NAME": "value"} with string values',
}


def _one_line(path: str, name: str, exc: ValidationError) -> UsageError:
    err = exc.errors()[0]
    key = str(err["loc"][0]) if err["loc"] else ""
    if err["type"] == "extra_forbidden":
        keys = ", ".join(Part.model_fields)
        return UsageError(f"parts file {path}: part {name!r}: unknown key {key!r} (keys: {keys})")
    fix = FIXES.get(key, err["msg"].removeprefix("Value error, "))
    value = err.get("input")
    return UsageError(f"parts file {path}: part {name!r}: {key} {value!r}: {fix}")


def check_parts(parts: dict[str, Part], path: str) -> None:
    """The rules that tie parts together (each part alone is the model's)."""

    def bad(name: str, what: str) -> UsageError:
        return UsageError(f"parts file {path}: part {name!r}: {what}")

    if not parts:
        raise UsageError(f"parts file {path}: no parts; name at least one Ray part, e.g. trainer: {{nodes: 1}}")
    for name, part in parts.items():
        if not PART_NAME.match(name):
            raise bad(name, "a part's name is lower-case letters, digits and _, starting with a letter")
        if part.sidecar_of is not None:
            host = parts.get(part.sidecar_of)
            if host is None:
                raise bad(name, f"sidecar_of {part.sidecar_of!r}: no such part (parts: {', '.join(parts)})")
            if not host.is_ray:
                raise bad(name, f"sidecar_of {part.sidecar_of!r}: a sidecar rides on a Ray part's nodes")
            if not part.is_service:
                raise bad(name, "a sidecar runs a service: give it a service command")
            if part.nodes or part.partition or part.exclusive:
                raise bad(name, "a sidecar runs on its host part's nodes: drop nodes, partition and exclusive")
            if part.replicas_per_node != 1:
                raise bad(name, "a sidecar runs one instance per node of its host part: drop replicas_per_node")
        elif part.nodes < 1:
            raise bad(name, f"nodes: {FIXES['nodes']}")
        if part.is_service:
            if PORT_FIELD not in (part.service or ""):
                raise bad(name, f"service {part.service!r}: put {PORT_FIELD} where the command takes its port")
            if part.gpus_per_node % part.replicas_per_node:
                raise bad(
                    name,
                    f"gpus_per_node {part.gpus_per_node} does not split evenly over replicas_per_node "
                    f"{part.replicas_per_node}: each instance gets the same share",
                )
        else:
            for key in ("replicas_per_node", "ready", "ready_timeout_s", "restarts", "required"):
                if key in part.model_fields_set:
                    raise bad(name, f"{key}: a Ray part runs no service; drop {key} or give a service command")
    if not any(p.is_ray for p in parts.values()):
        raise UsageError(
            f"parts file {path}: no Ray part (one without service): the driver and the Ray head run on the "
            f"first Ray part's first node"
        )


def parse_parts(data: Any, path: str) -> dict[str, Part]:
    if not isinstance(data, dict):
        raise UsageError(f"parts file {path}: a mapping of part names to parts, e.g. trainer: {{nodes: 2}}")
    parts: dict[str, Part] = {}
    for name, body in data.items():
        if not isinstance(body, dict):
            raise UsageError(f"parts file {path}: part {name!r}: a mapping of keys, e.g. {{nodes: 1}}")
        try:
            parts[str(name)] = Part.model_validate(body)
        except ValidationError as exc:
            raise _one_line(path, str(name), exc) from None
    check_parts(parts, path)
    return parts


def load_parts(path: str | Path) -> dict[str, Part]:
    """A parts file (YAML, or JSON: YAML reads both), checked; UsageError names the problem."""
    import yaml

    p = Path(path)
    try:
        text = p.read_text()
    except OSError as exc:
        raise UsageError(f"--parts {path}: cannot read it ({exc.strerror}); give a YAML or JSON parts file") from None
    try:
        data = json.loads(text) if p.suffix == ".json" else yaml.safe_load(text)
    except (ValueError, yaml.YAMLError) as exc:
        kind = "JSON" if p.suffix == ".json" else "YAML"
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else f"line {getattr(exc, 'lineno', '?')}"
        problem = getattr(exc, "problem", None) or getattr(exc, "msg", None) or str(exc).splitlines()[0]
        raise UsageError(f"--parts {path}: not valid {kind} at {where}: {problem}; fix the file") from None
    return parse_parts(data, str(path))


def with_job_defaults(
    parts: dict[str, Part], partition: str | None, cpus_per_node: int | None, mem: str | None
) -> dict[str, Part]:
    """Each part with the job's partition, CPUs and memory where it names none (a sidecar takes
    its host part's)."""
    out = {}
    for name, part in parts.items():
        if part.sidecar_of is not None:
            out[name] = part
            continue
        fill = {"partition": partition, "cpus_per_node": cpus_per_node, "mem": mem}
        out[name] = part.model_copy(update={k: v for k, v in fill.items() if getattr(part, k) is None})
    return out


def ray_parts(parts: dict[str, Part]) -> list[str]:
    return [name for name, part in parts.items() if part.is_ray]


def head_part(parts: dict[str, Part]) -> str:
    """The part whose first node runs the Ray head and the driver: the first Ray part."""
    return ray_parts(parts)[0]


def component_parts(parts: dict[str, Part]) -> list[str]:
    """The parts with nodes of their own, in the order of the job's heterogeneous components:
    the Ray parts (the head's first: SLURM's first component holds the batch script and rank 0),
    then the service parts, each as the file lists them. Ranks count in this order, so the job's
    Ray nodes are ranks 0..N-1. Sidecars ride on their host part's nodes: no component."""
    services = [n for n, p in parts.items() if p.is_service and p.sidecar_of is None]
    return [*ray_parts(parts), *services]


def component_offsets(parts: dict[str, Part]) -> dict[str, int]:
    """Each component part's first rank."""
    offsets, rank = {}, 0
    for name in component_parts(parts):
        offsets[name] = rank
        rank += parts[name].nodes
    return offsets


def ray_node_count(parts: dict[str, Part]) -> int:
    return sum(parts[n].nodes for n in ray_parts(parts))


def sidecars_of(parts: dict[str, Part], host: str) -> list[str]:
    return [n for n, p in parts.items() if p.sidecar_of == host]


def place(parts: dict[str, Part], rank: int, groups: list[list[str]]) -> tuple[str, list[str]]:
    """(this task's part, the job's Ray nodes in rank order) in a job of parts. Its step runs one
    task per node of each component, in component order, so a task's rank (SLURM_PROCID) tells
    its component; the components' node lists are SLURM's SLURM_JOB_NODELIST_HET_GROUP_<k>."""
    order = component_parts(parts)
    offsets = component_offsets(parts)
    part = next(name for name in reversed(order) if offsets[name] <= rank)
    ray = [n for i, name in enumerate(order) if parts[name].is_ray for n in groups[i]]
    return part, ray


def shared_ray_node(parts: dict[str, Part], groups: list[list[str]]) -> str | None:
    """A line naming two Ray parts SLURM placed on one node (a node runs one Ray node of a job),
    or None."""
    seen: dict[str, str] = {}
    for name, nodes in zip(component_parts(parts), groups):
        if not parts[name].is_ray:
            continue
        for node in nodes:
            if node in seen:
                return (
                    f"Ray parts {seen[node]} and {name} were both placed on {node}, and a node runs one Ray "
                    f"node of a job; set exclusive: true on one of them (SLURM then gives it nodes of its own)"
                )
            seen[node] = name
    return None
