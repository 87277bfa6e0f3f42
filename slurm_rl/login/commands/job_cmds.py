"""`slurm-rl` commands that look at and act on submitted jobs: status, list, logs, attach,
teardown (alias cancel). Registered on the main group by cli.py."""

from __future__ import annotations

import json
import os
import typing
from pathlib import Path

import click

from ...core.errors import UsageError
from ...core.paths import JobPaths
from .common import stopped_following
from .job_command import Session, job_command, slurm_client


def still_running(job_id: int | str) -> typing.NoReturn:
    """Ctrl-C stops following, not the job: say so, and how to stop it."""
    stopped_following(
        f"stopped following job {job_id}; it keeps running. See it with `slurm-rl status {job_id}`, "
        f"stop it with `slurm-rl teardown {job_id}`."
    )


# ---- looking at jobs ------------------------------------------------------------------------------
@job_command(job="optional", json_help="One JSON object per job.")
def status(session: Session, job: str | None, as_json: bool) -> None:
    """State (from SLURM), phase and nodes up of one job (a SLURM job id, a sweep task's
    ARRAYID_TASK or a local run's id), of every task of a sweep (its ARRAYID), or of your
    recent jobs."""
    from ..reading.job_tables import show_status

    show_status(job, session.user, session.client, session.spec, as_json)


LIST_LAST = 50


@job_command("list", job=None, json_help="One JSON object per job (and its cluster_name), newest first.")
@click.option("-n", "--last", default=LIST_LAST, show_default=True, type=click.IntRange(min=1), help="Newest N jobs.")
@click.option("--all", "every", is_flag=True, help="Every job of yours (a long history takes a while).")
@click.option("--this-cluster", "only_spec", is_flag=True, hidden=True)  # a laptop asking one login node
def list_jobs(session: Session, last: int, every: bool, as_json: bool, only_spec: bool) -> None:
    """Your jobs and local runs, of every spec, newest first: id, name, state, when, job dir. The
    newest 50 unless -n or --all says otherwise; a line on stderr says how many older ones exist.
    With a clusters file, every cluster's, asked in parallel; one reached only through its login
    node (a laptop's) is asked there."""
    from ..reading.cluster_states import job_cluster_name
    from ..reading.job_tables import list_rows, render_list
    from ..reading.lookup import all_job_dirs
    from .list_remote import login_only, through_logins

    remote = {} if session.spec_flag else login_only()  # a laptop's: asked on their login nodes
    far = {cluster for _, cluster in remote.values()}
    dirs = [p for p in all_job_dirs(session.user, session.spec) if not far or job_cluster_name(p) not in far]
    if only_spec:  # the jobs of the spec's cluster only (the laptop names the cluster)
        dirs = [p for p in dirs if job_cluster_name(p) == session.spec.cluster_name]
    shown = dirs if every else dirs[:last]
    rows, silent = list_rows(shown, session.client, slurm_client)  # with a clusters file: each cluster's own client
    older = len(dirs) - len(shown)
    if remote:
        rows, more, older = through_logins(rows, remote, {"last": last, "every": every}, older)
        silent += more
    for line in silent:
        click.echo(line, err=True)
    if as_json:
        for row in rows:
            click.echo(json.dumps(row))
    else:
        render_list(rows)
    if older > 0:
        click.echo(f"({older} older job(s) not shown: `slurm-rl list --all` or `-n N`)", err=True)


@job_command()
@click.option("--node", default=None, help="A node's bootstrap log instead of the driver's.")
@click.option("--batch", is_flag=True, help="SLURM's batch log (sbatch output) instead of the driver's.")
@click.option("-f", "--follow", is_flag=True, help="Keep printing until the job ends, then say how it ended.")
@click.option("--service", default=None, help="A job of parts: a service's instance log (with --instance I).")
@click.option("--instance", default=0, show_default=True, help="With --service: which instance (0, 1, ...).")
def logs(
    session: Session, job: str, node: str | None, batch: bool, follow: bool, service: str | None, instance: int
) -> None:
    """Print a job's driver log (or --node NODE, --batch, --service NAME). JOB: a SLURM job id or a
    local run's id."""
    from ...core.events import read_events
    from ...core.exits import oom_kills, oom_line
    from ...core.progress import open_stall
    from ..reading.follow import follow_file
    from ..reading.job_wait import GentleState, StallNotice
    from ..reading.summary import end_line, summarize

    client = session.client
    job_id, paths = session.job(job)
    path = paths.node_log(node) if node else paths.batch_log if batch else paths.driver_log
    if service:
        path = service_log(paths, job_id, service, instance, node)
    if node and not path.exists():
        have = sorted(p.name.removeprefix("node-").removesuffix(".log") for p in paths.logs.glob("node-*.log"))
        if have:
            raise UsageError(f"job {job_id} has no log of node {node!r}; its nodes: {', '.join(have)}")
    if not follow:
        if not path.exists():
            raise UsageError(f"job {job_id}: {path} does not exist yet (the job may not have started)")
        click.echo(path.read_text(), nl=False)
        oom = oom_line(oom_kills(read_events(paths.events)))
        if oom:  # the driver's log may show only a crashed worker: say memory, on stderr
            click.echo(f"slurm-rl: job {job_id}: {oom}", err=True)
        return
    gentle = GentleState(paths, job_id, client)
    stall = StallNotice()

    def done() -> bool:  # SLURM's final state; on the way, a stall said once on stderr
        news = stall.news(open_stall(read_events(paths.events)))
        if news:
            click.echo(f"slurm-rl: job {job_id}: {news}", err=True)
        return gentle.poll()

    try:
        follow_file(path, done)
    except KeyboardInterrupt:
        still_running(job_id)
    click.echo(end_line(summarize(paths, gentle.state)), err=True)


def service_log(paths: JobPaths, job_id: object, service: str, instance: int, node: str | None) -> Path:
    """A service instance's log: instance I of the service, on NODE when given (a service runs
    its instances on several nodes: numbered per node), else the first node that has one."""
    logs_dir = paths.logs / "services" / service
    found = sorted(logs_dir.glob(f"{node or '*'}-{instance}.log"))
    if not found:
        have = sorted(
            p.relative_to(paths.logs / "services").with_suffix("").as_posix()
            for p in (paths.logs / "services").glob("*/*.log")
        )
        raise UsageError(
            f"job {job_id} has no log of service {service!r} instance {instance}"
            + (f"{' on ' + node if node else ''}; it has: {', '.join(have)}" if have else " (no service has started)")
        )
    return found[0]


@job_command()
def plot(session: Session, job: str) -> None:
    """Draw a job's pictures into its job dir: metrics.png (every metric the driver logged with
    slurm_rl.MetricsLog, per step) and timeline.png (submit, nodes up, driver connected, steps,
    requeues). JOB is a SLURM job id, a local run's id or a job dir."""
    from pathlib import Path

    from ...core.paths import JobPaths
    from ..reading.plots import plot_job

    paths = JobPaths(Path(job)) if Path(job).is_dir() else session.job(job)[1]
    made = plot_job(paths.job_dir)
    if not made:
        raise UsageError(
            f"job {job}: nothing to draw yet ({paths.metrics.name} and {paths.events.name} are empty "
            f"or missing in {paths.job_dir})"
        )
    for png in made:
        click.echo(str(png))


@job_command()
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
@click.option(
    "--node", default=None, metavar="NODE", help="Another node of the job than the head (inside its container too)."
)
@click.option("--part", default=None, metavar="PART", help="A job of parts: the first node of this part.")
@click.option("--dashboard", is_flag=True, help="Print the ssh port-forward that reaches the job's Ray dashboard.")
@click.option(
    "--client",
    "via_client",
    is_flag=True,
    help="Run COMMAND here, off the job's nodes, through the job's Ray Client (jobs submitted with "
    "--ray-client); without COMMAND print the exports for `eval`.",
)
def attach(
    session: Session,
    job: str,
    command: tuple[str, ...],
    node: str | None,
    part: str | None,
    dashboard: bool,
    via_client: bool,
) -> None:
    """A shell (or COMMAND) on the job's head node, inside the job (and inside its container
    under pyxis), attached to its Ray; with --client, COMMAND runs where you are (a login
    node, a notebook server) and reaches the job through Ray Client (ray://HEAD:PORT).

    \b
    Examples:
      slurm-rl submit cluster_specs/lab.json -N 2   # no experiment: an interactive cluster
      slurm-rl attach 1234                       # interactive shell, RAY_ADDRESS set
      slurm-rl attach 1234 -- ray status         # one command
      slurm-rl attach 1234 --node node7 -- nvidia-smi   # on another node of the job
      slurm-rl attach 1234 --dashboard           # the ssh command for the dashboard
      slurm-rl attach 1234 --client -- python driver.py   # a driver here, via Ray Client
      eval "$(slurm-rl attach 1234 --client)"    # RAY_ADDRESS=ray://... and the token, here
    """
    from ..attach import plan_attach

    job_id, paths = session.job(job)
    node = part_node(paths, job_id, part) if part else node
    plan = plan_attach(job_id, paths, session.client, list(command), dashboard, via_client, node)
    for line in plan.out:
        click.echo(line)
    if plan.note:
        click.echo(plan.note, err=True)
    if plan.argv:
        os.environ.update(plan.env)
        try:
            os.execvp(plan.argv[0], plan.argv)
        except FileNotFoundError:
            raise UsageError(f"attach: no command {plan.argv[0]!r} on this machine's PATH") from None


def _teardown(session: Session, job: str, force: bool, as_json: bool) -> None:
    from ..reading.lookup import parse_job_id
    from ..sweep import find_sweep
    from ..teardown import teardown as do_teardown

    job_id = parse_job_id(job)
    sweep = find_sweep(job_id, session.user, session.spec) if isinstance(job_id, int) else None
    if sweep is not None:  # a sweep's array id: every task of it
        session.client.scancel(job_id)
        for task in sweep.task_ids:
            _teardown(session, task, force, as_json)
        return
    report = do_teardown(session.spec, session.user, job_id, session.client, force=force)
    if as_json:
        click.echo(json.dumps(report.as_dict()))
        return
    what = "cancelled" if report.cancelled else f"was already {report.state_before.lower()}"
    click.echo(f"job {job_id}: {what}; {report.killed_total} leftover process(es) stopped in {report.seconds:.1f} s")
    if not report.per_node:
        click.echo("  nothing to clean on nodes (the job never started on any)")
    for n in report.per_node:
        left = "nothing left (its bootstrap cleaned up at the job's end)" if n.get("cleaned_at_end") else "nothing left"
        killed = ", ".join(f"{k['name']}({k['pid']})" for k in n["killed"]) or left
        tmp = "; removed its temp dir" if n.get("temp_dir_removed") else ""
        click.echo(f"  {n['node']}: {killed}{tmp}")


FORCE = click.option(
    "--force", is_flag=True, help="Kill the job's processes at once instead of letting them stop on SIGTERM first."
)
TEARDOWN_JSON = "One JSON object with the per-node report."


@job_command(json_help=TEARDOWN_JSON)
@FORCE
def teardown(session: Session, job: str, force: bool, as_json: bool) -> None:
    """Cancel JOB if it runs, then stop whatever of it is left on each of its nodes. JOB: a job
    id, a sweep task (1234_5), or a sweep's array id (every task).

    Only processes positively marked as this job's are touched (its marker variable, its
    node-local temp dir); never another job's or user's. Safe to run twice. Exit 2 for a job
    that is not yours or unknown.
    """
    _teardown(session, job, force, as_json)


@job_command(json_help=TEARDOWN_JSON)
@FORCE
def cancel(session: Session, job: str, force: bool, as_json: bool) -> None:
    """Alias of `teardown`."""
    _teardown(session, job, force, as_json)


def part_node(paths: JobPaths, job_id: object, part: str) -> str:
    """The first node of a part of a job of parts (`attach --part NAME`)."""
    from ...core.manifest import load_manifest
    from ...core.service_states import status_fields

    parts = load_manifest(paths.manifest).parts
    if part not in parts:
        have = ", ".join(parts) or "none: it is not a job of parts"
        raise UsageError(f"job {job_id} has no part {part!r} (its parts: {have})")
    nodes = status_fields(paths.job_dir, parts, "")["parts"].get(part, {}).get("nodes") or []
    if not nodes:
        raise UsageError(f"job {job_id}: part {part!r} has no node up yet; try again once it runs")
    return str(nodes[0])
