"""`slurm-rl sweep` and `slurm-rl sweep-summary`: an experiment over a grid of arguments as one
SLURM job array (login/sweep.py), and what its tasks did (login/reading/sweep_report.py)."""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from ...core.errors import UsageError
from .cluster_choice import resolve_chosen
from .common import CONTEXT, job_options, resolve_submission, stopped_following
from .job_command import RemoteCommand, Session, job_command, slurm_client


@click.command(cls=RemoteCommand, context_settings=CONTEXT)
@job_options
@click.option(
    "--max-concurrent", type=int, default=None, metavar="K", help="At most K tasks run at once (--array=0-M%K)."
)
@click.option(
    "--grid", "grid", metavar="FILE", default=None, help="Points, one JSON object per line (times the comma lists)."
)
@click.option("--dry-run", is_flag=True, help="Print every task's arguments and the sbatch script; submit nothing.")
@click.option("--wait", is_flag=True, help="Follow every task until the last ends; exit 1 if any failed.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object (array_id, tasks).")
@click.option("--hold", is_flag=True, help="Submit held; start it with `scontrol release ARRAYID`.")
def sweep(
    max_concurrent: int | None, grid: str | None, dry_run: bool, wait: bool, as_json: bool, hold: bool, **kw: Any
) -> None:
    """Run EXPERIMENT over a grid: one SLURM job array, each task a job with its own Ray
    cluster over --nodes nodes, job dir (ARRAYID_TASK), token, ports and logs.

    \b
    Comma lists in the experiment's arguments expand to their product:
      slurm-rl sweep cluster_specs/lab.json exp.py -N 2 --max-concurrent 2 -- --lr 1e-4,3e-4 --seed 0,1
    runs 4 tasks, 2 at a time. --grid FILE adds points, one JSON object per line
    ({"lr": 1e-4, "seed": 0}). Then: `slurm-rl status ARRAYID`, `slurm-rl sweep-summary ARRAYID`.
    """
    from ..submission.plan import preview_plan
    from ..submission.render import render_sbatch
    from ..submission.resolve import changed
    from ..sweep import array_spec, point_text_args, submit_sweep, sweep_points

    cluster = click.get_current_context().meta.get("cluster")
    if click.get_current_context().meta.get("cluster_choice"):  # --cluster auto: where task 0 starts first
        s, opts, client, cluster = resolve_chosen(kw)
    else:
        s, opts = resolve_submission(kw)
        client = slurm_client(s)
    named = {"cluster": cluster} if cluster else {}
    if opts.interactive:
        raise UsageError("sweep: give an experiment (each task runs it with its own arguments)")
    points = sweep_points(opts.experiment_args, grid)
    if dry_run:
        opts = changed(opts, array=array_spec(len(points), max_concurrent))
        if as_json:
            click.echo(
                json.dumps(
                    {
                        "array": opts.array,
                        "tasks": [{"args": list(p.args), "point": p.values} for p in points],
                        "submitted": False,
                        **named,
                    }
                )
            )
            return
        for i, p in enumerate(points):
            click.echo(f"# task {i}: {point_text_args(p)}")
        click.echo(render_sbatch(preview_plan(s, opts, client)), nl=False)
        return
    done = submit_sweep(s, opts, points, client, max_concurrent=max_concurrent, release=not hold)
    if as_json and not wait:
        click.echo(
            json.dumps({"array_id": done.array_id, "sweep_dir": str(done.sweep_dir), "tasks": done.tasks, **named})
        )
        return
    if not as_json:
        click.echo(
            f"Submitted sweep {done.array_id}: {len(points)} task(s) of {opts.total_nodes} node(s)"
            f"{f', at most {max_concurrent} at once' if max_concurrent else ''}\n"
            + "".join(f"  {t['job_id']}: {point_text_args(p)}\n" for t, p in zip(done.tasks, points))
            + f"  status:  slurm-rl status {done.array_id}\n"
            f"  summary: slurm-rl sweep-summary {done.array_id}\n"
            f"  stop:    slurm-rl teardown {done.array_id}"
        )
    if wait:
        from ..reading.sweep_report import failure_lines, wait_for_sweep

        try:
            views = wait_for_sweep(done, client, quiet=as_json)
        except KeyboardInterrupt:
            stopped_following(
                f"stopped following sweep {done.array_id}; it keeps running "
                f"(`slurm-rl status {done.array_id}`, `slurm-rl teardown {done.array_id}`)."
            )
        failed = failure_lines(done, views)
        if as_json:
            click.echo(json.dumps({"array_id": done.array_id, "tasks": [v.summary.as_dict() for v in views], **named}))
        else:
            click.echo(f"sweep {done.array_id}: {len(views) - len(failed)} of {len(views)} task(s) succeeded")
            for line in failed:
                click.echo(line)
        sys.exit(1 if failed else 0)


@job_command("sweep-summary", argument="array_id", argument_type=int, json_help="One JSON object per task.")
@click.option("--metric", default=None, help="The metric to compare (default: reward, else the first logged).")
def sweep_summary(session: Session, array_id: int, metric: str | None, as_json: bool) -> None:
    """A sweep's tasks: their arguments, state, exit and last metrics (from metrics.jsonl), the
    failed ones with their reason, and comparison.png in the sweep's dir (METRIC per step, a
    line per task)."""
    from ..reading.sweep_report import (
        choose_metric,
        plot_comparison,
        print_summary,
        summary_rows,
        task_metrics,
        task_views,
    )
    from ..sweep import find_sweep

    found = find_sweep(array_id, session.user, session.spec)
    if found is None:
        raise UsageError(
            f"sweep {array_id}: no sweep with that array id (`slurm-rl list` shows your jobs; a task is ARRAYID_TASK)"
        )
    views = task_views(found, session.client)
    metrics = task_metrics(found)
    rows = summary_rows(found, views, metrics)
    chosen = choose_metric(metrics, metric)
    plot = plot_comparison(found, views, metrics, chosen, found.sweep_dir / "comparison.png") if chosen else None
    if metric and plot is None:
        logged = ", ".join(sorted({k for r in rows for k in r["metrics"]})) or "nothing yet"
        raise UsageError(f"--metric {metric}: no task logged it; logged: {logged}")
    if as_json:
        for r in rows:
            click.echo(json.dumps({**r, "plot": str(plot) if plot else None}))
        return
    print_summary(found, rows, chosen, plot)
