"""A job command typed on a laptop (no SLURM here) with a clusters file: the job's cluster
decides which login node runs it. ``CLUSTER:JOBID`` names it; a bare id is looked for on every
named cluster's login node at once (`list --all --json` there, that cluster's jobs only), and
the one cluster that has it runs the command; several that have one are refused, the ways to
say which named, as on a login node (job_command.Session.pin_job). Asked by the laptop's
forwarder (laptop/cli.py) where no --login or $SLURM_RL_LOGIN names a host. Without this every
command went to the default spec's login node, which at separate sites never sees another
cluster's jobs."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from ...config.clusters import Cluster


def pin_remote(ctx: click.Context, text: str) -> tuple[str, Cluster] | None:
    """The job's id as the login node takes it and its cluster's entry, where this machine
    reaches the clusters only through their login nodes; None anywhere else, or where no
    cluster answered that it has the job (the command then goes where it went before)."""
    from ...config.clusters import load_clusters
    from .job_command import job_cluster
    from .list_remote import login_only, through_logins

    remote = login_only()
    if not remote:
        return None

    def holders(job: str) -> list[str]:  # every login node asked at once: those whose own rows have it
        if len(remote) == 1:
            return list(remote)
        lister = ctx.find_root().command.get_command(ctx, "list")  # type: ignore[attr-defined]
        assert isinstance(lister, click.Command)
        with ctx.scope():
            rows, _, _ = through_logins([], remote, {"last": 1, "every": True}, 0, command=lister)
        return sorted({r["cluster"] for r in rows if r.get("job") == job})

    named = load_clusters()
    cluster, bare = job_cluster(text, named, holders)
    if cluster is None or not named[cluster].login:
        return None
    return bare, named[cluster]


def pinned_params(ctx: click.Context, params: dict[str, Any], flag: str | None) -> str | None:
    """For a job command on a laptop: ``params`` made those of the job's cluster (its spec, the
    bare id) and the login host that runs it; ``flag`` as it was anywhere else."""
    text = params.get("job")
    if flag is not None or params.get("spec_flag") or not isinstance(text, str) or not text:
        return flag
    pinned = pin_remote(ctx, text)
    if pinned is None:
        return flag
    params["job"], entry = pinned
    params["spec_flag"] = entry.spec
    return str(entry.login)
