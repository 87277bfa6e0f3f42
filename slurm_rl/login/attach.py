"""`slurm-rl attach`, decided without click: what to run (a shell or COMMAND on the job's head
node, inside its container when it has one; or COMMAND here through Ray Client) with which
environment, or what to print (the dashboard's ssh forward, the Ray Client exports). The
command layer only prints the plan and execs it."""

from __future__ import annotations

import getpass
import os
import shlex
import socket
from dataclasses import dataclass, field
from typing import Any

from ..core.errors import UsageError
from ..core.events import read_events, read_json
from ..core.job_env import RAY_ADDRESS_ENV, ray_token_env
from ..core.manifest import JobManifest, load_manifest
from ..core.paths import JobPaths
from ..runtimes import runtime_of
from ..slurm import SlurmClient
from .reading.lookup import JobId


@dataclass
class AttachPlan:
    argv: list[str] = field(default_factory=list)  # exec this (empty: nothing to run)
    env: dict[str, str] = field(default_factory=dict)  # with these set
    out: list[str] = field(default_factory=list)  # lines for stdout
    note: str = ""  # one line for stderr


def ray_env(address: str, paths: JobPaths) -> dict[str, str]:
    """What a Ray program needs to reach the job: its address and the job's token."""
    return {RAY_ADDRESS_ENV: address, **ray_token_env(paths.ray_auth_token)}


def plan_attach(
    job_id: JobId,
    paths: JobPaths,
    client: SlurmClient,
    command: list[str],
    dashboard: bool,
    via_client: bool,
    node: str | None = None,
) -> AttachPlan:
    state = client.job_state(job_id)
    if state.finished or state.state == "UNKNOWN":
        raise UsageError(
            f"job {job_id} has ended ({state.state}); attach works while a job runs. "
            f"Its logs: `slurm-rl logs {job_id}`; a new cluster: `slurm-rl submit SPEC -N 2`"
        )
    cluster = read_json(paths.cluster)
    if not cluster:
        raise UsageError(
            f"job {job_id}: no cluster.json yet in {paths.job_dir}; wait until `slurm-rl status {job_id}` says ready"
        )
    if dashboard:
        return AttachPlan(out=[dashboard_forward(job_id, paths, cluster)])
    if via_client:
        return client_plan(job_id, paths, cluster, command)
    env = ray_env(cluster["address"], paths)
    node = node or cluster["head_node"]
    manifest = load_manifest(paths.manifest)
    nodes = [*cluster.get("nodes", [node]), *nodes_of_parts(paths, manifest)]  # a service part's nodes run no Ray
    if node not in nodes:
        raise UsageError(f"job {job_id} has no node {node!r}; its nodes: {', '.join(nodes)}")
    shell = not command  # an interactive shell, with a terminal
    # the job's own environment around the command, as its driver has it: the spec's env and
    # setup lines, and the interpreter's directory first on PATH (an image's `ray`, `python`)
    command = ["bash", "-c", job_prelude(paths, manifest), "slurm-rl-attach", *(command or ["bash", "-i"])]
    # into the running job's container, as its runtime joins one
    container = manifest.container
    try:
        command = runtime_of(container.runtime).attach(
            container,
            container.workdir or str(paths.job_dir),
            manifest.temp_dir(str(job_id)),
            command,
            sorted(env),
            bootstrap_pid(paths, node),
        )
    except UsageError as exc:
        raise UsageError(f"job {job_id} on {node}: {exc}") from None
    numeric = client.numeric_job_id(job_id)
    argv = SlurmClient.attach_argv(numeric, node, command, pty=shell, het_group=client.het_groups(numeric).get(node))
    note = ""
    if shell:  # a shell: say what it is attached to, and the NeMo Gym override
        note = (
            f"job {job_id} on {node}: RAY_ADDRESS={cluster['address']} (token set); NeMo Gym: "
            f"ng_run ... +ray_head_node_address={cluster['address']} (or +config_paths=[{paths.gym_env}])"
        )
    return AttachPlan(argv=argv, env=env, note=note)


def nodes_of_parts(paths: JobPaths, manifest: JobManifest) -> list[str]:
    """Every node of a job of parts, its service parts' (which run no Ray) included; none for
    any other job."""
    if not manifest.parts:
        return []
    from ..core.service_states import status_fields

    return [n for p in status_fields(paths.job_dir, manifest.parts, "")["parts"].values() for n in p["nodes"]]


def job_prelude(paths: JobPaths, manifest: JobManifest) -> str:
    """A shell prelude that gives a command the job's environment, then execs it: the spec's
    variables (secret-looking ones from the job dir's 0600 file, as the batch script does), its
    setup lines, and the spec's interpreter's directory first on PATH."""
    spec_env = (read_json(paths.spec) or {}).get("env") or {}
    lines = [f"export {k}={shlex.quote(str(v))}" for k, v in spec_env.items()]
    secrets = shlex.quote(str(paths.secrets))
    lines.append(f"if [ -r {secrets} ]; then set -a; . {secrets}; set +a; fi")
    lines += list(manifest.setup)
    if "/" in manifest.python:
        lines.append(f'PATH={shlex.quote(os.path.dirname(manifest.python))}:"$PATH"; export PATH')
    lines.append('exec "$@"')
    return "\n".join(lines)


def client_plan(job_id: JobId, paths: JobPaths, cluster: dict[str, Any], command: list[str]) -> AttachPlan:
    """COMMAND here with the job's Ray Client address and token; without one, the exports."""
    address = cluster.get("client_address")
    if not address:
        raise UsageError(
            f'job {job_id} serves no Ray Client: resubmit with --ray-client (or set "ray_client": true in the '
            f"spec); `slurm-rl attach {job_id}` runs on the head node without it"
        )
    env = ray_env(address, paths)
    if not command:
        return AttachPlan(
            out=[f"export {name}={shlex.quote(value)}" for name, value in env.items()],
            note=f"# job {job_id}: a driver here reaches it through Ray Client (ray.init() or init_ray())",
        )
    return AttachPlan(argv=list(command), env=env)


def bootstrap_pid(paths: JobPaths, node: str) -> int | None:
    """The pid of the latest bootstrap on ``node`` (its node_start event)."""
    starts = [e for e in read_events(paths.events) if e.get("event") == "node_start" and e.get("node") == node]
    return int(starts[-1]["pid"]) if starts and "pid" in starts[-1] else None


def dashboard_forward(job_id: JobId, paths: JobPaths, cluster: dict[str, Any]) -> str:
    """The one ssh command (run on your laptop) that forwards the job's dashboard to localhost."""
    if not load_manifest(paths.manifest).wants_dashboard:
        raise UsageError(
            f"job {job_id} was submitted without --dashboard (interactive clusters always have it): resubmit "
            f'with --dashboard, or set "dashboard": true in the spec; `slurm-rl attach {job_id} -- ray status` '
            f"works without it"
        )
    port = cluster["ports"]["dashboard"]
    return (
        f"ssh -N -L 8265:{cluster['head_ip']}:{port} {getpass.getuser()}@{socket.getfqdn()}"
        f"    # then open http://localhost:8265 (job {job_id}, head {cluster['head_node']}); it asks for the "
        f"job's token ({paths.ray_auth_token}): `slurm-rl dashboard {job_id}` on a laptop with slurm-rl needs none"
    )
