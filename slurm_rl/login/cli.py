"""The `slurm-rl` command line: parse, call, print. Logic lives in the other modules."""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from .._version import __version__
from ..config.spec import load_spec, resolve_spec_path
from ..core.paths import current_user
from .commands import cluster_cmds, image_cmds, job_cmds, member_cmds, race_cmds, result_cmds, stack_cmds, sweep_cmds
from .commands.after_submit import after_submit
from .commands.cluster_choice import resolve_able, resolve_chosen, submit_first_cmd
from .commands.common import CONTEXT, Main, job_options, resolve_submission
from .commands.job_command import RemoteCommand, slurm_client


@click.group(cls=Main, context_settings=CONTEXT)
@click.version_option(__version__, prog_name="slurm-rl")
def cli() -> None:
    """slurm-rl: one Ray cluster per SLURM job, and nothing left behind when it ends.

    \b
    Typical use:
      slurm-rl spec validate cluster_specs/lab.json      # check a cluster spec
      slurm-rl submit cluster_specs/lab.json exp.py -N 3 --wait
      slurm-rl status                                   # your jobs, their phase
      slurm-rl logs JOBID [-f]                          # the driver's output
      slurm-rl stacks JOBID                             # where every process of it is now
      slurm-rl run exp.py                               # no SLURM: embedded local Ray
      slurm-rl doctor cluster_specs/lab.json --probe    # is this site ready for the spec?

    The spec comes from SPEC.json, --spec, or $CLUSTER_SPEC_PATH; with none, a local default
    (fileroot ~/.cache/slurm_rl). Exit code 2 means bad input: nothing was submitted.
    """


# ---- spec -------------------------------------------------------------------------------------
@cli.group(context_settings=CONTEXT)
def spec() -> None:
    """Check and show cluster specs."""


@spec.command("validate", context_settings=CONTEXT)
@click.argument("path", required=False)
@click.option(
    "--nodelist",
    default=None,
    metavar="HOSTLIST",
    help="Also check that these nodes (e.g. 'gpu[01-04],cpu1') match a node type regex.",
)
def spec_validate(path: str | None, nodelist: str | None) -> None:
    """Validate a spec (PATH, else $CLUSTER_SPEC_PATH, else the local default); exit 2 if bad."""
    from ..core.nodelist import expand_hostlist

    s = load_spec(path)
    if nodelist:
        s.check_node_names(expand_hostlist(nodelist))
    where = resolve_spec_path(path) or "built-in local default"
    click.echo(f"ok: {where} ({s.cluster_type} cluster {s.cluster_name!r}, fileroot {s.fileroot})")


@spec.command("show", context_settings=CONTEXT)
@click.argument("path", required=False)
def spec_show(path: str | None) -> None:
    """Print the resolved spec, defaults filled in, as JSON."""
    click.echo(load_spec(path).to_json(), nl=False)


# ---- render / submit ----------------------------------------------------------------------------
@cli.command(cls=RemoteCommand, context_settings=CONTEXT)
@job_options
def render(**kw: Any) -> None:
    """Print the exact sbatch script `submit` would run (nothing is submitted)."""
    from .submission.plan import preview_plan
    from .submission.render import render_sbatch

    s, opts = resolve_submission(kw)
    click.echo(render_sbatch(preview_plan(s, opts, slurm_client(s))), nl=False)


@cli.command(cls=RemoteCommand, context_settings=CONTEXT)
@job_options
@click.option("--dry-run", is_flag=True, help="Print the sbatch script and submit nothing.")
@click.option("--wait", is_flag=True, help="Follow the job until it ends; exit with the driver's exit code.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object (job_id, job_dir, nodes, state).")
@click.option("--hold", is_flag=True, help="Submit held; start it later with `scontrol release JOBID`.")
@click.option("--estimate", is_flag=True, hidden=True, help="SLURM's estimated start as JSON; submit nothing.")
@click.option("--start-gate-s", "gate_s", type=int, default=0, hidden=True, help="Wait this long for a race's go.")
def submit(dry_run: bool, wait: bool, as_json: bool, hold: bool, estimate: bool, gate_s: int, **kw: Any) -> None:
    """Submit EXPERIMENT as one SLURM job running one Ray cluster over --nodes nodes.

    \b
    Example:
      slurm-rl submit cluster_specs/lab.json examples/hello.py --nodes 3 --wait -- --steps 5
    """
    from .submission.plan import preview_plan
    from .submission.render import render_job
    from .submission.submit import submit as do_submit

    chosen = None  # the cluster named or chosen (--cluster NAME|auto): the id is printed with it
    choice = click.get_current_context().meta.get("cluster_choice")
    if choice == "first":  # every cluster that can run it; the first to start is kept
        submit_first_cmd(resolve_able(kw), dry_run, wait, as_json, hold, after_submit)
        return
    if choice:  # (one reached through its login node: the submit goes there, and this exits)
        s, opts, client, chosen = resolve_chosen(kw)
    elif estimate:  # a laptop's --cluster auto asking this cluster (login/commands/cluster_choice.py)
        from .submission.choose import estimate as estimated

        s, opts = resolve_submission(kw)
        start, waiting = estimated(s, opts, slurm_client(s))
        click.echo(json.dumps({"start": start, "waiting": waiting}))
        return
    else:
        s, opts = resolve_submission(kw)
        if gate_s:  # a laptop's --cluster first racing this cluster (login/commands/race_remote.py)
            opts = opts.model_copy(update={"start_gate_s": gate_s})
        client = slurm_client(s)
        chosen = click.get_current_context().meta.get("cluster")  # --cluster NAME
    if dry_run:  # what submit would stage, resolved as submit resolves it
        job = render_job(preview_plan(s, opts, client))
        if not as_json:
            click.echo(job.script, nl=False)
            return
        manifest = json.loads(job.manifest.to_json())  # for scripts: the script and the manifest
        said = {"script": job.script, "manifest": manifest, "nodes": opts.total_nodes, "submitted": False}
        click.echo(json.dumps({**said, **({"cluster": chosen} if chosen else {})}))
        return
    if opts.chain > 1:
        from .commands.chain_cmds import submit_and_follow_chain

        submit_and_follow_chain(s, opts, client, wait, as_json, hold)
        return
    res = do_submit(s, opts, client, release=not hold)
    try:  # from here on the job exists: Ctrl-C stops following it, never the job
        after_submit(res, opts, client, wait, as_json, chosen)
    except KeyboardInterrupt:
        from .commands.job_cmds import still_running

        still_running(res.job_id)


@cli.command(context_settings=CONTEXT)
@click.argument("experiment", type=click.Path(dir_okay=False))
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
@click.option(
    "--spec",
    "spec_flag",
    metavar="PATH",
    help='Its fileroot holds the run\'s job dir; a spec with cluster_type "ray" also names the Ray '
    "cluster to use (default: the local default).",
)
@click.option(
    "--ray-address",
    metavar="HOST:PORT",
    default=None,
    help="Run on this existing Ray cluster instead of an embedded one (NeMo Gym's "
    "ray_head_node_address); a token comes from RAY_AUTH_TOKEN(_PATH) or the spec.",
)
@click.option("-J", "--name", default=None, help="Run name (default: the experiment's file name).")
def run(
    experiment: str, args: tuple[str, ...], spec_flag: str | None, ray_address: str | None, name: str | None
) -> None:
    """Run EXPERIMENT without SLURM, on an embedded local Ray (or an existing cluster:
    --ray-address, or a spec with cluster_type "ray"); exits with its exit code.

    \b
      slurm-rl run examples/grpo.py
      slurm-rl run --ray-address 10.0.0.5:6379 examples/grpo.py -- --steps 20
    """
    from .local import run_local

    sys.exit(run_local(load_spec(spec_flag), experiment, args, name=name, user=current_user(), ray_address=ray_address))


@cli.command(cls=RemoteCommand, context_settings=CONTEXT)
@click.argument("spec_path", metavar="[SPEC]", required=False)
@click.option(
    "--probe", is_flag=True, help="Also submit one tiny job (one node, 2 minutes at most) to check the nodes."
)
@click.option("--json", "as_json", is_flag=True, help="One JSON object per check.")
def doctor(spec_path: str | None, probe: bool, as_json: bool) -> None:
    """Check this site against a spec, one line per check (✓ ok, ! works with a caveat, ✗ a job
    would fail, - not checked) with the fix: SLURM's version, the spec's partition, account and
    QOS, process tracking and cgroups, GPUs, the container runtime; with --probe, from a compute node: the
    fileroot shared, the network interface, Ray's ports, Python and Ray. Exit 1 if any ✗."""
    from .doctor import site_checks
    from .doctor_probe import not_probed, probe_checks

    s = load_spec(spec_path)
    client = slurm_client(s)
    checks = site_checks(s, client, current_user())
    if any(c.status == "fail" for c in checks):  # the probe job would run with what failed
        checks += not_probed(s, "not checked: the probe job would use what failed above; fix that first")
    else:
        checks += probe_checks(s, client) if probe else not_probed(s)
    for c in checks:
        click.echo(json.dumps(c.as_dict()) if as_json else c.line())
    sys.exit(1 if any(c.status == "fail" for c in checks) else 0)


for _command in (
    sweep_cmds.sweep,
    sweep_cmds.sweep_summary,
    job_cmds.status,
    job_cmds.list_jobs,
    job_cmds.logs,
    job_cmds.plot,
    job_cmds.attach,
    stack_cmds.stacks,
    job_cmds.teardown,
    job_cmds.cancel,
    member_cmds.grow,
    member_cmds.shrink,
    result_cmds.fetch,
    result_cmds.dashboard,
    image_cmds.images,
    cluster_cmds.clusters,
    race_cmds.race,
):
    cli.add_command(_command)


def main() -> None:
    cli(prog_name="slurm-rl")


if __name__ == "__main__":
    main()
