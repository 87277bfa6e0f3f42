"""`slurm-rl race JOB`, hidden: one job of a `submit --cluster first` race, run where that job's
SLURM answers. A laptop racing clusters it reaches only through their login nodes asks each
login node this way (login/commands/race_remote.py): the job's state (--state), the go past its
start gate (--go), its cancel with nothing left (--drop), and what submit prints after its
submission (the rest: --wait follows it to its end, --json is one object)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import click

from .after_submit import after_submit
from .job_command import Session, job_command


@job_command("race", json_help="One JSON object, as submit --json prints it.", hidden=True)
@click.option("--state", "look", is_flag=True, help="The job's SLURM state as JSON.")
@click.option("--go", is_flag=True, help="Let its batch script past its start gate.")
@click.option("--drop", is_flag=True, help="Cancel it and remove its job dir once SLURM let it go.")
@click.option("--wait", is_flag=True, help="Follow it until it ends, as submit --wait.")
@click.option("--named", default=None, help="The cluster's name where the race was typed (CLUSTER:JOBID).")
def race(
    session: Session, job: str, as_json: bool, look: bool, go: bool, drop: bool, wait: bool, named: str | None
) -> None:
    """One job of a `submit --cluster first` race (a laptop's, through this login node)."""
    from ..submission.first import drop_job

    job_id, paths = session.job(job)
    client = session.client
    if look:
        st = client.job_state(job_id)
        click.echo(json.dumps({"state": st.state, "reason": st.reason}))
        return
    label = f"{named}:{job_id}" if named else str(job_id)
    if drop:
        drop_job(client, job_id, paths, label, lambda line: click.echo(f"slurm-rl: {line}", err=True))
        return
    if go:
        paths.start_go.touch()
        if not (wait or as_json):
            return
    nodes = json.loads(paths.manifest.read_text()).get("nodes") or 1
    after_submit(
        SimpleNamespace(job_id=job_id, paths=paths), SimpleNamespace(total_nodes=nodes), client, wait, as_json, named
    )
