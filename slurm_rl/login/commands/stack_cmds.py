"""`slurm-rl stacks JOB`: the Python stack of every process of a running job, grouped, in
seconds (core/stacks.py says how: each node's bootstrap asks its own processes; nothing is
traced). From the login node, or a laptop (forwarded like `status`)."""

from __future__ import annotations

import time

import click

from ...core.errors import UsageError
from ...core.events import read_events, write_atomic
from ...core.job_dir import lost_nodes
from ...core.stacks import kept, read_answers, report_path, request
from ...core.stacks_report import render
from .job_command import Session, job_command


@job_command()
@click.option("--node", metavar="NODE", help="Only this node's processes.")
@click.option(
    "--native",
    is_flag=True,
    help="Also each process's native (C/C++) frames, by py-spy from the node's bootstrap, whose "
    "descendants the job's processes are (allowed under kernel.yama.ptrace_scope=1).",
)
@click.option(
    "--timeout", default=15.0, show_default=True, metavar="SECONDS", help="How long to wait for every node's answer."
)
def stacks(session: Session, job: str, node: str | None, native: bool, timeout: float) -> None:
    """Print the Python stack of every process of a running job: the driver, every Ray worker and
    actor (named by its class and method, with its rank), on every node, bare or in containers.
    Identical stacks are grouped with their count and ranks; the odd ones out come first (a
    rank that never joined the collective its peers wait in). Each call is kept in the job dir
    (stacks/<id>/stacks.txt). JOB: a SLURM job id.

    \b
    How: every process of the job armed Python's faulthandler on SIGWINCH at its start; each
    node's bootstrap signals its own and collects the dumps. No ptrace: it works where the
    kernel restricts it (Ubuntu's ptrace_scope=1) and without root."""
    from ..reading.lookup import job_state_for

    if timeout <= 0:
        raise UsageError(f"--timeout {timeout:g}: must be > 0 seconds")
    client = session.client
    job_id, paths = session.job(job)
    events = read_events(paths.events)
    state = job_state_for(paths, client)
    running = lost_nodes(events)  # nodes of the last attempt that started, not ended, not stopping
    if state.state != "RUNNING" or not running:
        old = kept(paths.job_dir)
        why = "has not started" if state.state == "PENDING" else f"is not running ({state.state})"
        where = f"; the last stacks it kept: {old[-1]}" if old else "; it kept no stacks"
        raise UsageError(f"job {job_id} {why}: there are no processes to ask{where}")
    if node and node not in running:
        raise UsageError(f"job {job_id} has no running node {node!r}; its nodes: {', '.join(running)}")
    wanted = [node] if node else running
    rid = request(paths.job_dir, "slurm-rl stacks", nodes=wanted, native=native)
    deadline = time.monotonic() + timeout + (30 if native else 0)
    answers = read_answers(paths.job_dir, rid)
    while set(wanted) - set(answers) and time.monotonic() < deadline:
        time.sleep(0.2)
        answers = read_answers(paths.job_dir, rid)
    missing = sorted(set(wanted) - set(answers))
    report = render(str(job_id), answers, missing, report_path(paths.job_dir, rid))
    report_path(paths.job_dir, rid).parent.mkdir(parents=True, exist_ok=True)
    write_atomic(report_path(paths.job_dir, rid), report)
    click.echo(report, nl=False)
    if missing and not answers:
        raise click.exceptions.Exit(1)
