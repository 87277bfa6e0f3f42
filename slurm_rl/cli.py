"""The `slurm-rl` command line: parse, call, print. Logic lives in the other modules."""

from __future__ import annotations

import functools
import json
import os
import sys
from collections.abc import Callable
from typing import Any

import click

from . import __version__
from .errors import SlurmRlError, UsageError
from .options import JobOptions, resolve_options
from .paths import current_user
from .spec import SPEC_ENV_VAR, ClusterSpec, load_spec, resolve_spec_path

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


def _err(msg: str) -> None:
    click.echo(f"slurm-rl: error: {msg}", err=True)


def _split_positionals(items: tuple[str, ...], spec_flag: str | None) -> tuple[ClusterSpec, str, tuple[str, ...]]:
    """[SPEC.json] EXPERIMENT [ARGS...] -> (spec, experiment, args)."""
    if not items:
        raise UsageError("missing EXPERIMENT; usage: slurm-rl submit SPEC.json EXPERIMENT.py [--nodes N] [-- ARGS]")
    spec_path = spec_flag
    rest = list(items)
    if rest[0].endswith(".json"):
        spec_path = rest.pop(0)
    if not rest:
        raise UsageError("missing EXPERIMENT after the spec; pass the driver script, e.g. experiment.py")
    return load_spec(spec_path), rest[0], tuple(rest[1:])


def _with(decorators: list[Callable[..., Any]], f: Callable[..., Any]) -> Callable[..., Any]:
    """Apply click decorators listed top to bottom, as if stacked above ``f``."""
    for d in reversed(decorators):
        f = d(f)
    return f


def job_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """Flags shared by `render` and `submit`."""
    return _with([
        click.argument("args", nargs=-1, type=click.UNPROCESSED, metavar="[SPEC.json] EXPERIMENT [-- ARGS...]"),
        click.option("--spec", "spec_flag", metavar="PATH", help=f"Cluster spec (else first argument if it ends in .json, else ${SPEC_ENV_VAR})."),
        click.option("-N", "--nodes", type=int, default=1, show_default=True, help="Nodes: one Ray node on each."),
        click.option("--gpus-per-node", type=int, default=None, help="GPUs per node (default: the spec's gpus_per_node)."),
        click.option("--cpus-per-node", type=int, default=None, help="CPUs per node for Ray (default: the spec's cpus_per_node, else what SLURM gives)."),
        click.option("-t", "--time", default=None, metavar="TIME", help="Time limit, e.g. 30, 1:00:00, 2-00:00:00."),
        click.option("-p", "--partition", default=None, help="Partition (default: the spec's)."),
        click.option("-A", "--account", default=None, help="Account (default: the spec's)."),
        click.option("-J", "--name", default=None, help="Job name, also the job dir's parent (default: the experiment's file name)."),
        click.option("--container-image", default=None, metavar="IMAGE", help="Override the spec's cpu_image/gpu_image."),
        click.option("--port-base", type=int, default=None, help="First of the 100 ports this job's Ray uses (default: derived from the job id)."),
        click.option("--ready-timeout", "ready_timeout_s", type=float, default=180.0, show_default=True, help="Seconds for all nodes to join before the job fails."),
        click.option("--oversubscribe", is_flag=True, help="Let other jobs share this job's nodes (sbatch --oversubscribe)."),
        click.option("--signal", default="B:USR2@120", show_default=True, help="Warning signal before the time limit; the driver gets it via slurm_rl.on_preempt(callback). Never USR1 (NCCL's)."),
        click.option("--requeue", type=int, default=0, show_default=True, help="Requeue a failed job (driver exit != 0, lost node) up to this many times."),
    ], f)


def _resolve(kw: dict[str, Any]) -> tuple[ClusterSpec, JobOptions]:
    spec, experiment, args = _split_positionals(kw.pop("args"), kw.pop("spec_flag"))
    return spec, resolve_options(spec, experiment, experiment_args=args, user=current_user(), **kw)


class Main(click.Group):
    def main(self, *args: Any, **kwargs: Any) -> Any:  # one place turns our errors into exit codes
        try:
            return super().main(*args, standalone_mode=False, **kwargs)
        except click.exceptions.Exit as exc:
            sys.exit(exc.exit_code)
        except click.ClickException as exc:
            exc.show()
            sys.exit(exc.exit_code)
        except click.exceptions.Abort:
            _err("aborted")
            sys.exit(130)
        except SlurmRlError as exc:
            _err(str(exc))
            sys.exit(exc.exit_code)


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
      slurm-rl run exp.py                               # no SLURM: embedded local Ray

    The spec comes from SPEC.json, --spec, or $CLUSTER_SPEC_PATH; with none, a local default
    (fileroot ~/.cache/slurm_rl). Exit code 2 means bad input: nothing was submitted.
    """


# ---- spec -------------------------------------------------------------------------------------
@cli.group(context_settings=CONTEXT)
def spec() -> None:
    """Check and show cluster specs."""


@spec.command("validate", context_settings=CONTEXT)
@click.argument("path", required=False)
@click.option("--nodelist", default=None, metavar="HOSTLIST",
              help="Also check that these nodes (e.g. 'gpu[01-04],cpu1') match a node type regex.")
def spec_validate(path: str | None, nodelist: str | None) -> None:
    """Validate a spec (PATH, else $CLUSTER_SPEC_PATH, else the local default); exit 2 if bad."""
    from .nodelist import expand_hostlist

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
@cli.command(context_settings=CONTEXT)
@job_options
def render(**kw: Any) -> None:
    """Print the exact sbatch script `submit` would run (nothing is submitted)."""
    from .render import render_sbatch

    s, opts = _resolve(kw)
    click.echo(render_sbatch(s, opts), nl=False)


@cli.command(context_settings=CONTEXT)
@job_options
@click.option("--dry-run", is_flag=True, help="Print the sbatch script and submit nothing.")
@click.option("--wait", is_flag=True, help="Follow the job until it ends; exit with the driver's exit code.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object (job_id, job_dir, nodes, state).")
@click.option("--hold", is_flag=True, help="Submit held; start it later with `scontrol release JOBID`.")
def submit(dry_run: bool, wait: bool, as_json: bool, hold: bool, **kw: Any) -> None:
    """Submit EXPERIMENT as one SLURM job running one Ray cluster over --nodes nodes.

    \b
    Example:
      slurm-rl submit cluster_specs/lab.json examples/hello.py --nodes 3 --wait -- --steps 5
    """
    from .render import render_sbatch
    from .slurm import SlurmClient
    from .submit import submit as do_submit

    s, opts = _resolve(kw)
    if dry_run:
        click.echo(render_sbatch(s, opts), nl=False)
        return
    client = SlurmClient()
    res = do_submit(s, opts, client, release=not hold)
    if as_json and not wait:
        click.echo(json.dumps({"job_id": res.job_id, "job_dir": str(res.paths.job_dir), "nodes": opts.nodes,
                               "state": client.job_state(res.job_id).state}))
        return
    if not as_json:
        click.echo(f"Submitted job {res.job_id} ({opts.nodes} node{'s' * (opts.nodes > 1)})\n"
                   f"  job dir: {res.paths.job_dir}\n"
                   f"  status:  slurm-rl status {res.job_id}\n"
                   f"  logs:    slurm-rl logs {res.job_id} -f\n"
                   f"  stop:    scancel {res.job_id}")
    if wait:
        from .watch import wait_for_job

        summary = wait_for_job(s, res.job_id, client, quiet=as_json)
        if as_json:
            click.echo(json.dumps({**summary.as_dict(), "nodes": opts.nodes}))
        sys.exit(summary.exit_code if summary.exit_code is not None else 1)


# ---- looking at jobs ------------------------------------------------------------------------------
@cli.command(context_settings=CONTEXT)
@click.argument("job_id", type=int, required=False)
@click.option("--spec", "spec_flag", metavar="PATH", help=f"Cluster spec (default: ${SPEC_ENV_VAR}).")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per job.")
def status(job_id: int | None, spec_flag: str | None, as_json: bool) -> None:
    """State (from SLURM), phase and nodes up of one job, or of your recent jobs."""
    from .jobs import all_job_dirs, job_summary, summarize
    from .slurm import SlurmClient
    from .watch import print_table

    s, client = load_spec(spec_flag), SlurmClient()
    if job_id is not None:
        rows = [job_summary(s, current_user(), job_id, client)]
    else:
        rows = [summarize(p, client.job_state(int(p.job_dir.name))) for p in all_job_dirs(s, current_user())[-10:]]
    if as_json:
        for r in rows:
            click.echo(json.dumps(r.as_dict()))
    else:
        print_table(rows)


@cli.command("list", context_settings=CONTEXT)
@click.option("--spec", "spec_flag", metavar="PATH", help=f"Cluster spec (default: ${SPEC_ENV_VAR}).")
def list_jobs(spec_flag: str | None) -> None:
    """Your jobs under the spec's fileroot, newest last."""
    from .jobs import all_job_dirs

    for p in all_job_dirs(load_spec(spec_flag), current_user()):
        click.echo(f"{p.job_dir.name}\t{p.job_dir.parent.name}\t{p.job_dir}")


@cli.command(context_settings=CONTEXT)
@click.argument("job_id", type=int)
@click.option("--node", default=None, help="A node's bootstrap log instead of the driver's.")
@click.option("--batch", is_flag=True, help="SLURM's batch log (sbatch output) instead of the driver's.")
@click.option("-f", "--follow", is_flag=True, help="Keep printing until the job ends.")
@click.option("--spec", "spec_flag", metavar="PATH", help=f"Cluster spec (default: ${SPEC_ENV_VAR}).")
def logs(job_id: int, node: str | None, batch: bool, follow: bool, spec_flag: str | None) -> None:
    """Print a job's driver log (or --node NODE, --batch)."""
    from .jobs import find_job_dir
    from .slurm import SlurmClient
    from .watch import follow_file

    paths = find_job_dir(load_spec(spec_flag), current_user(), job_id)
    path = paths.node_log(node) if node else paths.batch_log if batch else paths.driver_log
    if not follow:
        if not path.exists():
            raise UsageError(f"job {job_id}: {path} does not exist yet (the job may not have started)")
        click.echo(path.read_text(), nl=False)
        return
    client = SlurmClient()
    follow_file(path, lambda: client.job_state(job_id).finished or client.job_state(job_id).state == "UNKNOWN")


@cli.command(context_settings=CONTEXT)
@click.argument("job_id", type=int)
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
@click.option("--spec", "spec_flag", metavar="PATH", help=f"Cluster spec (default: ${SPEC_ENV_VAR}).")
def attach(job_id: int, command: tuple[str, ...], spec_flag: str | None) -> None:
    """A shell (or COMMAND) on the job's head node, inside the job, attached to its Ray.

    \b
    Examples:
      slurm-rl attach 1234                       # interactive shell, RAY_ADDRESS set
      slurm-rl attach 1234 -- ray status         # one command
    """
    from .events import read_json
    from .jobs import find_job_dir
    from .slurm import SlurmClient

    paths = find_job_dir(load_spec(spec_flag), current_user(), job_id)
    cluster = read_json(paths.cluster)
    if not cluster:
        raise UsageError(f"job {job_id}: no cluster.json yet in {paths.job_dir}; wait until `slurm-rl status {job_id}` says ready")
    argv = SlurmClient.attach_argv(job_id, cluster["head_node"], list(command))
    os.environ["RAY_ADDRESS"] = cluster["address"]
    os.environ["RAY_AUTH_MODE"] = "token"
    os.environ["RAY_AUTH_TOKEN_PATH"] = str(paths.ray_auth_token)
    os.execvp(argv[0], argv)


def _teardown(job_id: int, force: bool, as_json: bool, spec_flag: str | None) -> None:
    from .slurm import SlurmClient
    from .teardown import teardown as do_teardown

    report = do_teardown(load_spec(spec_flag), current_user(), job_id, SlurmClient(), force=force)
    if as_json:
        click.echo(json.dumps(report.as_dict()))
        return
    what = "cancelled" if report.cancelled else f"was already {report.state_before.lower()}"
    click.echo(f"job {job_id}: {what}; {report.killed_total} leftover process(es) stopped in {report.seconds:.1f} s")
    if not report.per_node:
        click.echo("  nothing to clean on nodes (the job never started on any)")
    for n in report.per_node:
        killed = ", ".join(f"{k['name']}({k['pid']})" for k in n["killed"]) or "nothing left"
        tmp = "; removed its temp dir" if n.get("temp_dir_removed") else ""
        click.echo(f"  {n['node']}: {killed}{tmp}")


_TEARDOWN_OPTS = [
    click.argument("job_id", type=int),
    click.option("--force", is_flag=True, help="Kill the job's processes at once instead of letting them stop on SIGTERM first."),
    click.option("--json", "as_json", is_flag=True, help="One JSON object with the per-node report."),
    click.option("--spec", "spec_flag", metavar="PATH", help=f"Cluster spec (default: ${SPEC_ENV_VAR})."),
]


@cli.command(context_settings=CONTEXT)
@functools.partial(_with, _TEARDOWN_OPTS)
def teardown(job_id: int, force: bool, as_json: bool, spec_flag: str | None) -> None:
    """Cancel JOB_ID if it runs, then stop whatever of it is left on each of its nodes.

    Only processes positively marked as this job's are touched (its marker variable, its
    node-local temp dir); never another job's or user's. Safe to run twice. Exit 2 for a job
    that is not yours or unknown.
    """
    _teardown(job_id, force, as_json, spec_flag)


@cli.command(context_settings=CONTEXT)
@functools.partial(_with, _TEARDOWN_OPTS)
def cancel(job_id: int, force: bool, as_json: bool, spec_flag: str | None) -> None:
    """Alias of `teardown`."""
    _teardown(job_id, force, as_json, spec_flag)


@cli.command(context_settings=CONTEXT)
@click.argument("experiment", type=click.Path(dir_okay=False))
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
@click.option("--spec", "spec_flag", metavar="PATH", help="Only its fileroot is used (default: the local default).")
@click.option("-J", "--name", default=None, help="Run name (default: the experiment's file name).")
def run(experiment: str, args: tuple[str, ...], spec_flag: str | None, name: str | None) -> None:
    """Run EXPERIMENT without SLURM, on an embedded local Ray; exits with its exit code."""
    from .local import run_local

    sys.exit(run_local(load_spec(spec_flag), experiment, args, name=name, user=current_user()))


def main() -> None:
    cli(prog_name="slurm-rl")


if __name__ == "__main__":
    main()
