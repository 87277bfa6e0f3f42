"""`slurm-rl grow` and `slurm-rl shrink`: member jobs that add nodes to a running job and release
them (login/grow_shrink.py). Registered on the main group by cli.py."""

from __future__ import annotations

import click

from ...core.errors import UsageError
from ...core.fields import slurm_time
from .common import stopped_following
from .job_command import Session, job_command


def _time(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    if value is None:
        return None
    try:
        return slurm_time(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


@job_command()
@click.option("--nodes", "-N", type=click.IntRange(min=1), required=True, help="How many nodes to add.")
@click.option("--partition", "-p", default=None, help="Their partition (default: the job's), e.g. a preemptible one.")
@click.option("--qos", "-q", default=None, help="Their QOS (default: the job's).")
@click.option(
    "--time",
    "-t",
    "time_limit",
    default=None,
    callback=_time,
    help="Their time limit (default and at most: what the job has left).",
)
@click.option(
    "--wait/--no-wait",
    default=True,
    show_default=True,
    help="Wait until their Ray nodes joined the job, saying how it goes.",
)
@click.option("--timeout", type=click.FloatRange(min=1), default=600, show_default=True, help="Seconds --wait waits.")
def grow(
    session: Session,
    job: str,
    nodes: int,
    partition: str | None,
    qos: str | None,
    time_limit: str | None,
    wait: bool,
    timeout: float,
) -> None:
    """Add NODES nodes to running JOB's Ray cluster, as a member job of its own.

    The member runs the job's member script: same account, CPUs, memory and GPUs per node, the
    job's container, never on a node the job has or had, for at most the time the job has left.
    Its Ray nodes join with the job's token and tags; the driver sees them come and go
    (`slurm_rl.members()`, `slurm_rl.on_member_change`). It ends with the job; a member that
    SLURM preempts or that fails just leaves, and the job goes on.

    \b
      slurm-rl grow 1234 --nodes 2 --partition spot   # rollout nodes from a preemptible partition
      slurm-rl shrink 1234 --member 1                  # release them
    """
    from ..grow_shrink import grow as do_grow

    job_id, paths = session.job(job)
    try:
        do_grow(
            job_id, paths, session.client, nodes, partition, qos, time_limit, timeout if wait else 0.0, say=click.echo
        )
    except KeyboardInterrupt:
        stopped_following(f"stopped waiting; the member stays: `slurm-rl status {job_id}`")


@job_command()
@click.option(
    "--member", "-m", type=click.IntRange(min=1), default=None, help="The member's number (`slurm-rl status`)."
)
@click.option("--node", default=None, help="Or: the member that has this node.")
@click.option(
    "--drain-timeout",
    type=click.FloatRange(min=0),
    default=10,
    show_default=True,
    help="Seconds to wait for Ray to drain its nodes.",
)
def shrink(session: Session, job: str, member: int | None, node: str | None, drain_timeout: float) -> None:
    """Release a grown member of running JOB: its Ray nodes drain (Ray places no new work
    there), then its SLURM job ends. The job goes on."""
    from ..grow_shrink import shrink as do_shrink

    if (member is None) == (node is None):
        raise UsageError(
            "shrink: name the member to release: --member N or --node NODE (`slurm-rl status JOB` lists them)"
        )
    job_id, paths = session.job(job)
    do_shrink(job_id, paths, session.client, member, node, drain_s=drain_timeout, say=click.echo)
