"""`slurm-rl clusters [add|remove]`: the clusters a user submits to by name (config/clusters.py),
each asked at once, in parallel, whether its SLURM answers, which version and which partitions:
a cluster that does not answer is one line, not a failure."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass

import click

from ...config.clusters import Cluster, add_cluster, cluster_spec, clusters_path, known, load_clusters, remove_cluster
from ...core.errors import SlurmRlError
from ...slurm.runner import client_installed
from .job_command import CONTEXT, slurm_client

ASK_TIMEOUT_S = 10.0  # a cluster that has not answered by then is said to be silent


@dataclass(frozen=True)
class ClusterView:
    name: str
    spec: str
    login: str | None
    answers: bool
    version: str = ""
    partitions: tuple[str, ...] = ()
    why: str = ""  # why it did not answer, or where it is asked from

    def line(self) -> str:
        where = f" (login {self.login})" if self.login else ""
        if not self.answers:
            return f"{self.name}{where}: does not answer: {self.why}"
        return f"{self.name}{where}: SLURM {self.version}; partitions {', '.join(self.partitions) or '(none)'}"


def ask(name: str, entry: Cluster) -> ClusterView:
    """Whether a cluster's SLURM answers from here, its version and partitions (two calls)."""
    if entry.login and not client_installed():
        return ClusterView(
            name, entry.spec, entry.login, False, why=f"reached through {entry.login}, not asked from here"
        )
    try:
        client = slurm_client(cluster_spec(name))
        client.timeout_s = ASK_TIMEOUT_S
        version = str(client.version())
        parts = tuple(p.name + ("*" if p.default else "") for p in client.answering_partitions().values())
    except (SlurmRlError, OSError) as exc:
        return ClusterView(name, entry.spec, entry.login, False, why=" ".join(str(exc).split())[:300])
    return ClusterView(name, entry.spec, entry.login, True, version, parts)


@click.group(invoke_without_command=True, context_settings=CONTEXT)
@click.option("--json", "as_json", is_flag=True, help="One JSON object per cluster.")
@click.pass_context
def clusters(ctx: click.Context, as_json: bool) -> None:
    """The clusters you submit to by name (`--cluster NAME` on submit and every job command),
    each asked in parallel whether it answers, its SLURM version and partitions. The file is
    $SLURM_RL_CLUSTERS, else $XDG_CONFIG_HOME/slurm_rl/clusters.json (~/.config/...).

    \b
      slurm-rl clusters add a cluster_specs/lab.json
      slurm-rl clusters add b cluster_specs/lab-b.json --login me@login-b
      slurm-rl clusters
      slurm-rl submit --cluster b examples/hello.py -N 2 --wait
      slurm-rl clusters remove b
    """
    if ctx.invoked_subcommand is not None:
        return
    named = load_clusters()
    if not named:
        click.echo(f"no clusters: {known(named)}", err=True)
        return
    with ThreadPoolExecutor(max_workers=min(16, len(named))) as pool:
        views = list(pool.map(lambda item: ask(*item), sorted(named.items())))
    for v in views:
        click.echo(json.dumps(asdict(v)) if as_json else v.line())


@clusters.command("add", context_settings=CONTEXT)
@click.argument("name")
@click.argument("spec", type=click.Path(dir_okay=False))
@click.option("--login", metavar="[USER@]HOST", default=None, help="The login node that runs its commands.")
def add(name: str, spec: str, login: str | None) -> None:
    """Name a cluster by its spec (which must load now), and the login host that reaches it."""
    entry = add_cluster(name, spec, login)
    click.echo(f"cluster {name}: spec {entry.spec}" + (f", login {login}" if login else "") + f" ({clusters_path()})")


@clusters.command("remove", context_settings=CONTEXT)
@click.argument("name")
def remove(name: str) -> None:
    """Forget a cluster (its spec and jobs stay where they are)."""
    remove_cluster(name)
    click.echo(f"cluster {name} removed ({clusters_path()})")
