"""`slurm-rl submit --chain K`: submit a chain (login/submission/chain.py), say what was submitted, and
with --wait follow its jobs one after the other until the run finished or the chain ran out."""

from __future__ import annotations

import json
import sys

import click

from ...config.spec import ClusterSpec
from ...core.options import JobOptions
from ...slurm import SlurmClient
from ..submission.chain import chain_finished, submit_chain
from .common import stopped_following


def submit_and_follow_chain(
    spec: ClusterSpec, opts: JobOptions, client: SlurmClient, wait: bool, as_json: bool, hold: bool
) -> None:
    jobs = submit_chain(spec, opts, client, release=not hold)
    run_dir = jobs[0].paths.job_dir
    ids = [j.job_id for j in jobs]
    if as_json and not wait:
        click.echo(
            json.dumps({"chain": ids, "run_dir": str(run_dir), "job_dirs": [str(j.paths.job_dir) for j in jobs]})
        )
        return
    if not as_json:
        click.echo(
            f"Submitted a chain of {len(jobs)} jobs ({opts.total_nodes} node{'s' * (opts.total_nodes > 1)} each), "
            f"each starting when the one before ends: {' '.join(map(str, ids))}\n"
            f"  run dir: {run_dir}   (slurm_rl.run_dir() in the driver: checkpoints go here)\n"
            f"  status:  slurm-rl status {ids[0]}   (and each later id)\n"
            f"  stop:    slurm-rl teardown {' '.join(map(str, ids))}"
        )
    if not wait:
        return
    from ..reading.job_wait import wait_for_job

    summaries = []
    try:
        for job in jobs:
            summary = wait_for_job(job.paths, job.job_id, client, quiet=as_json)
            summaries.append(summary)
            if chain_finished(run_dir) or summary.state.startswith("CANCELLED"):
                break
    except KeyboardInterrupt:
        stopped_following(f"stopped following the chain {ids}; it keeps running.")
    finished = chain_finished(run_dir)
    last = next((s for s in reversed(summaries) if not s.state.startswith("CANCELLED")), summaries[-1])
    if as_json:
        click.echo(json.dumps({"chain": ids, "finished": finished, "jobs": [s.as_dict() for s in summaries]}))
    else:
        ran = [s for s in summaries if not s.state.startswith("CANCELLED")]
        click.echo(
            f"chain {ids[0]}: {'finished' if finished else 'not finished'} after {len(ran)} job(s)"
            + ("" if finished else f" of {len(ids)}; its checkpoints are in {run_dir}")
        )
    sys.exit(0 if finished else (last.exit_code or 1))
