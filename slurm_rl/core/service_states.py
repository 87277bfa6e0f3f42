"""A job of parts' services as its job dir records them: each instance's state file
(``services/<part>/<node>-<i>.json``, written by job/service_instances.py on its node) and the head's
balancers (``services/balancers.json``). Read by the head (service_watch.py, balancer.py), the
driver (``slurm_rl.services()``) and ``status``."""

from __future__ import annotations

import json
from pathlib import Path

from .events import write_atomic
from .parts import Part
from .private_dir import claim_private_dir

JOB_DIR_POINTER = "job_dir"  # in the job's node-local dir: where a worker finds the job dir


def write_job_dir_pointer(temp_dir: str, job_dir: Path) -> None:
    """Ray's workers carry no SLURM_* variable (NeMo RL's rule, distributed/worker_env), so a
    worker finds the job dir (its services) through the node-local dir its Ray session is in."""
    claim_private_dir(temp_dir)
    write_atomic(Path(temp_dir) / JOB_DIR_POINTER, str(job_dir) + "\n")


def short_host(name: str) -> str:
    return name.split(".")[0]


def expected_instances(parts: dict[str, Part]) -> dict[str, int]:
    """How many instances each service part runs in all."""
    out = {}
    for name, part in parts.items():
        if part.is_service:
            nodes = parts[part.sidecar_of].nodes if part.sidecar_of else part.nodes
            out[name] = nodes * part.replicas_per_node
    return out


def read_states(services_dir: Path, attempt: int | None = None) -> dict[str, list[dict]]:
    """Each service's instances' states (of ``attempt``; None: of the newest attempt)."""
    out: dict[str, list[dict]] = {}
    found = []
    for path in sorted(services_dir.glob("*/*.json")):
        try:
            found.append((path.parent.name, json.loads(path.read_text())))
        except (OSError, ValueError):
            continue
    if attempt is None:
        attempt = max((s.get("attempt", 0) for _, s in found), default=0)
    for name, state in found:
        if state.get("attempt", 0) == attempt:
            out.setdefault(name, []).append(state)
    return out


def balancer_urls(services_dir: Path) -> dict[str, str]:
    try:
        return dict(json.loads((services_dir / "balancers.json").read_text()).get("urls") or {})
    except (OSError, ValueError):
        return {}


def summary(services_dir: Path, parts: dict[str, Part]) -> dict[str, dict]:
    """``{NAME: {"ready", "total", "restarts", "failed", "url", "instances", "by_node", "nodes"}}``
    (``by_node``: each node's ready instances; ``nodes``: every node with an instance)."""
    states, urls = read_states(services_dir), balancer_urls(services_dir)
    out = {}
    for name, total in expected_instances(parts).items():
        mine = states.get(name, [])
        ready = [s for s in mine if s.get("ready")]
        by_node: dict[str, list[str]] = {}
        for s in ready:
            by_node.setdefault(s["node"], []).append(s["url"])
        out[name] = {
            "ready": len(ready),
            "total": total,
            "restarts": sum(int(s.get("restarts") or 0) for s in mine),
            "failed": sum(1 for s in mine if s.get("state") == "failed"),
            "url": urls.get(name, ""),
            "instances": sorted(s["url"] for s in ready),
            "by_node": by_node,
            "nodes": sorted({s["node"] for s in mine}),
        }
    return out


def parts_view(seen: dict[str, dict], parts: dict[str, Part], ray_nodes: list[str], phase: str) -> dict[str, dict]:
    """``{NAME: {"nodes": [...], "state": ...}}`` for ``status``: a Ray part's nodes (the job's Ray
    nodes in rank order, cluster.json) and the job's phase; a service's nodes and "ready",
    "starting", "degraded" (an instance past its restarts, not required) or "failed". ``seen``:
    ``summary``'s."""
    from .parts import component_parts

    out: dict[str, dict] = {}
    offset = 0
    for name in component_parts(parts):
        if parts[name].is_ray:
            out[name] = {"nodes": ray_nodes[offset : offset + parts[name].nodes], "state": phase}
            offset += parts[name].nodes
    for name, service in seen.items():
        if service["failed"]:
            state = "failed" if parts[name].required else "degraded"
        else:
            state = "ready" if service["ready"] == service["total"] else "starting"
        out[name] = {"nodes": sorted(service["by_node"]) or service["nodes"], "state": state}
    return out


def status_fields(job_dir: Path, parts: dict[str, Part], phase: str) -> dict[str, dict]:
    """``status``'s ``parts`` and ``services`` (``{NAME: {"ready", "total", "restarts", "url"}}``)
    of a job of parts, from one read of the job dir."""
    from .events import read_json
    from .paths import JobPaths

    paths = JobPaths(job_dir)
    seen = summary(paths.services, parts)
    ray_nodes = list((read_json(paths.cluster) or {}).get("nodes") or [])
    services = {name: {k: s[k] for k in ("ready", "total", "restarts", "url")} for name, s in seen.items()}
    return {"parts": parts_view(seen, parts, ray_nodes, phase), "services": services}
