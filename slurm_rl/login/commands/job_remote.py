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

from ...core.errors import UsageError

if TYPE_CHECKING:
    from ...config.clusters import Cluster


def pin_remote(ctx: click.Context, text: str) -> tuple[str, Cluster] | None:
    """The job's id as the login node takes it and its cluster's entry, where this machine
    reaches the clusters only through their login nodes; None anywhere else, or where no
    cluster answered that it has the job (the command then goes where it went before)."""
    from ...config.clusters import known, load_clusters
    from .list_remote import login_only, through_logins

    remote = login_only()
    if not remote:
        return None
    name, sep, bare = text.partition(":")
    if sep:
        named = load_clusters()
        if name not in named:
            raise UsageError(f"job {text}: no cluster {name!r}; {known(named)}")
        return (bare, named[name]) if named[name].login else None
    if len(remote) == 1:
        return text, next(iter(remote.values()))[0]
    lister = ctx.find_root().command.get_command(ctx, "list")  # type: ignore[attr-defined]
    assert isinstance(lister, click.Command)
    with ctx.scope():
        rows, _, _ = through_logins([], remote, {"last": 1, "every": True}, 0, command=lister)
    names = sorted({r["cluster"] for r in rows if r.get("job") == text})
    if len(names) > 1:
        ways = " or ".join(f"`{n}:{text}`" for n in names)
        raise UsageError(f"job {text}: clusters {', '.join(names)} each have a job {text}; say which: {ways}")
    return (text, remote[names[0]][0]) if names else None


def pinned_params(ctx: click.Context, params: dict[str, Any], flag: str | None) -> str | None:
    """For a job command on a laptop: ``params`` made those of the job's cluster (its spec, the
    bare id) and the login host that runs it; ``flag`` as it was anywhere else."""
    text = params.get("job")
    if flag is not None or params.get("spec_flag") or not isinstance(text, str) or not text:
        return flag
    pinned = pin_remote(ctx, text)
    if pinned is None:
        return flag
    params["job"], entry = pinned[0], pinned[1]
    params["spec_flag"] = entry.spec
    return str(entry.login)
