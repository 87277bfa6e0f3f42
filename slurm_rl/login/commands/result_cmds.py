"""`slurm-rl fetch` and `slurm-rl dashboard`: a job's results copied where you are, and where its
Ray dashboard answers. From a laptop (a spec's "login", --login) the same commands copy over ssh
and forward the dashboard to 127.0.0.1 (slurm_rl/laptop)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from .job_command import Session, job_command


@job_command()
@click.option(
    "--to",
    "to",
    default=None,
    metavar="DIR",
    help="Where the files go (default: ./JOBID); '-' writes one gzip'd tar to stdout.",
)
def fetch(session: Session, job: str, to: str | None) -> None:
    """Copy a job's results here: metrics.jsonl, the plots, the driver's log, how it ended
    (manifest, events, exit files) and every file the driver wrote to slurm_rl.output_dir().

    \b
      slurm-rl fetch 1234                 # into ./1234/
      slurm-rl fetch 1234 --to results/   # from a laptop too (spec "login" or --login)
    """
    from ..reading.results import copy_results, write_results_tar

    job_id, paths = session.job(job)
    if to == "-":
        write_results_tar(paths, sys.stdout.buffer)
        return
    destination = Path(to or str(job_id))
    copied = copy_results(paths, destination)
    click.echo(f"job {job_id}: {len(copied)} file(s) into {destination}/")


@job_command(json_help="One JSON object: head_node, host, port, url.")
@click.option(
    "--tensorboard",
    is_flag=True,
    help="TensorBoard over the job's event files instead (slurm_rl.MetricsLog writes them), "
    "on 127.0.0.1 here until Ctrl-C; a running job or an ended one.",
)
@click.option("--until-stdin-closes", "stdin_bound", is_flag=True, hidden=True)  # a laptop's ssh drives it
def dashboard(session: Session, job: str, tensorboard: bool, as_json: bool, stdin_bound: bool) -> None:
    """Where the Ray dashboard of a job submitted with --dashboard answers, from this machine.
    From a laptop (a spec's "login", or --login) it is forwarded through the login node to a
    free port on 127.0.0.1 until Ctrl-C; the same for --tensorboard.

    \b
      slurm-rl dashboard 1234                 # http://10.0.0.5:8301 (job 1234, head node gpu01)
      slurm-rl dashboard 1234 --tensorboard   # http://127.0.0.1:PORT until Ctrl-C
    """
    from ..reading.results import dashboard_address

    client = session.client
    job_id, paths = session.job(job)
    if tensorboard:
        from .. import tensorboard as board

        proc, port = board.start(board.logdir_of(str(job_id), paths))
        url = f"http://127.0.0.1:{port}"
        click.echo(
            json.dumps({"job_id": job_id, "host": "127.0.0.1", "port": port, "url": url})
            if as_json
            else f"{url}    # TensorBoard of job {job_id}; Ctrl-C stops it"
        )
        sys.stdout.flush()
        board.serve(proc, until_stdin_closes=stdin_bound)
        return
    where = dashboard_address(job_id, paths, client)
    if as_json:
        click.echo(json.dumps(where))
    else:
        click.echo(f"{where['url']}    # Ray dashboard of job {job_id} (head node {where['head_node']})")
