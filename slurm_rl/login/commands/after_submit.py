"""What `submit` does once its job is in SLURM's queue, whichever way it got there (a plain
submit, --cluster NAME|auto, the race of --cluster first, here or on a login node)."""

from __future__ import annotations

import json
import sys
from typing import Any

import click


def after_submit(res: Any, opts: Any, client: Any, wait: bool, as_json: bool, cluster: str | None = None) -> None:
    """What submit prints once a job is in the queue (its id, job dir and the commands for it, or
    one JSON object), and with --wait, the job followed to its end: this process exits with it."""
    named = {"cluster": cluster} if cluster else {}  # --cluster auto's choice
    if as_json and not wait:
        click.echo(
            json.dumps(
                {
                    "job_id": res.job_id,
                    "job_dir": str(res.paths.job_dir),
                    "nodes": opts.total_nodes,
                    "state": client.job_state(res.job_id).state,
                    **named,
                }
            )
        )
        return
    if not as_json:
        job = f"{cluster}:{res.job_id}" if cluster else res.job_id  # a chosen cluster: the id says which
        click.echo(
            f"Submitted job {job} ({opts.total_nodes} node{'s' * (opts.total_nodes > 1)})\n"
            f"  job dir: {res.paths.job_dir}\n"
            f"  status:  slurm-rl status {job}\n"
            f"  logs:    slurm-rl logs {job} -f\n"
            f"  stop:    slurm-rl teardown {job}"
        )
    if wait:
        from ..reading.job_wait import wait_for_job
        from ..reading.plots import redraw_after_end

        summary = wait_for_job(res.paths, res.job_id, client, quiet=as_json)
        redraw_after_end(res.paths)
        if as_json:  # slurm_calls: every SLURM command this submit ran, the wait included
            click.echo(
                json.dumps({**summary.as_dict(), "nodes": opts.total_nodes, "slurm_calls": client.calls, **named})
            )
        sys.exit(summary.exit_code if summary.exit_code is not None else 1)
