"""`slurm-rl stacks JOB`: the Python stack of every process of a running job, grouped, in
seconds (core/stacks.py says how: each node's bootstrap asks its own processes; nothing is
traced). From the login node, or a laptop (forwarded like `status`)."""

from __future__ import annotations

import time

import click

from ..config.spec import load_spec
from ..core.errors import UsageError
from ..core.events import read_events, write_atomic
from ..core.job_dir import lost_nodes
from ..core.paths import current_user
from ..core.stacks import kept, read_answers, report_path, request
from ..core.stacks_report import render
from .cli_common import CONTEXT, spec_option


@click.command(context_settings=CONTEXT)
@click.argument("job")
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
@spec_option()
def stacks(job: str, node: str | None, native: bool, timeout: float, spec_flag: str | None) -> None:
    """Print the Python stack of every process of a running job: the driver, every Ray worker and
    actor (named by its class and method, with its rank), on every node, bare or in containers.
    Identical stacks are grouped with their count and ranks; the odd ones out come first (a
    rank that never joined the collective its peers wait in). Each call is kept in the job dir
    (stacks/<id>/stacks.txt). JOB: a SLURM job id.

    \b
    How: every process of the job armed Python's faulthandler on SIGWINCH at its start; each
    node's bootstrap signals its own and collects the dumps. No ptrace: it works where the
    kernel restricts it (Ubuntu's ptrace_scope=1) and without root."""
    from ..slurm import SlurmClient
    from .lookup import job_state_for, resolve_job

    if timeout <= 0:
        raise UsageError(f"--timeout {timeout:g}: must be > 0 seconds")
    client = SlurmClient()
    job_id, paths = resolve_job(job, current_user(), client, load_spec(spec_flag))
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
