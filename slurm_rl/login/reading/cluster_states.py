"""The states of jobs on several clusters (`slurm-rl list` with a clusters file): each job's
cluster is the named cluster whose spec has the job's ``cluster_name`` (its job dir's spec.json),
and every cluster is asked at once, in parallel, bounded: one that does not answer is one line,
its jobs shown from their job dirs, the others' within their own time. Without a clusters file
this is lookup.job_states over this machine's SLURM, unchanged."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from ...config.clusters import cluster_spec, load_clusters
from ...config.spec import ClusterSpec
from ...core.errors import SlurmRlError
from ...core.paths import JobPaths
from ...slurm import JobState, SlurmClient
from .lookup import job_states

ASK_TIMEOUT_S = 10.0  # per cluster; they are asked side by side


def job_cluster_name(paths: JobPaths) -> str:
    try:
        return str(json.loads(paths.spec.read_text()).get("cluster_name") or "")
    except (OSError, ValueError):
        return ""


def states_by_cluster(
    dirs: list[JobPaths], client: SlurmClient, client_for: Callable[[ClusterSpec], SlurmClient] | None = None
) -> tuple[dict[str, JobState], dict[str, str], list[str]]:
    """(states by job id, each job's cluster name ({} without a clusters file), one line per
    cluster that did not answer); ``client_for``: a cluster's SLURM client (the commands' one
    maker, login/commands/job_command.py's slurm_client)."""
    named = load_clusters()
    if not named or client_for is None:
        return job_states(dirs, client), {}, []
    by_name: dict[str, str] = {}
    clients: dict[str, SlurmClient] = {}
    for name in sorted(named):
        try:
            spec = cluster_spec(name)
        except SlurmRlError:
            continue  # its own command says why (`slurm-rl clusters`)
        by_name.setdefault(spec.cluster_name, name)
        clients[name] = client_for(spec)
        clients[name].timeout_s = ASK_TIMEOUT_S
    cluster_of = {p.job_id: by_name.get(job_cluster_name(p), "") for p in dirs}
    groups: dict[str, list[JobPaths]] = defaultdict(list)
    for p in dirs:
        groups[cluster_of[p.job_id]].append(p)

    def ask(name: str) -> tuple[dict[str, JobState], str]:
        group, asked = groups[name], clients.get(name, client)
        try:
            asked.my_queue(check=True)  # answers at all (a silent one would read as forgotten jobs)
            return job_states(group, asked), ""
        except SlurmRlError as exc:
            why = " ".join(str(exc).split())[:200]
            line = f"cluster {name or 'here'}: does not answer ({why}); its jobs as their job dirs say"
            return {p.job_id: JobState(p.job_id, "UNKNOWN") for p in group}, line

    with ThreadPoolExecutor(max_workers=min(16, len(groups) or 1)) as pool:
        answers = list(pool.map(ask, sorted(groups)))
    states = {k: v for got, _ in answers for k, v in got.items()}
    return states, cluster_of, [line for _, line in answers if line]
