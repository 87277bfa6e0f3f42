"""What every `slurm-rl` command shares: error handling, the job flags, spec resolution."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import click

from ..core.errors import SlurmRlError, UsageError
from ..core.paths import current_user
from ..core.spec import SPEC_ENV_VAR, ClusterSpec, load_spec
from .options import JobOptions, resolve_options

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


def _err(msg: str) -> None:
    click.echo(f"slurm-rl: error: {msg}", err=True)


def _split_positionals(items: tuple[str, ...], spec_flag: str | None) -> tuple[ClusterSpec, str | None, tuple[str, ...]]:
    """[SPEC.json] [EXPERIMENT [ARGS...]] -> (spec, experiment or None: interactive, args)."""
    spec_path = spec_flag
    rest = list(items)
    if rest and rest[0].endswith(".json"):
        spec_path = rest.pop(0)
    return load_spec(spec_path), (rest[0] if rest else None), tuple(rest[1:])


def _with(decorators: list[Callable[..., Any]], f: Callable[..., Any]) -> Callable[..., Any]:
    """Apply click decorators listed top to bottom, as if stacked above ``f``."""
    for d in reversed(decorators):
        f = d(f)
    return f


def job_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """Flags shared by `render` and `submit`."""
    return _with([
        click.argument("args", nargs=-1, type=click.UNPROCESSED, metavar="[SPEC.json] [EXPERIMENT [-- ARGS...]]"),
        click.option("--spec", "spec_flag", metavar="PATH", help=f"Cluster spec (else first argument if it ends in .json, else ${SPEC_ENV_VAR})."),
        click.option("-N", "--nodes", type=int, default=1, show_default=True, help="Nodes: one Ray node on each."),
        click.option("--gpus-per-node", type=int, default=None, help="GPUs per node (default: the spec's gpus_per_node)."),
        click.option("--cpus-per-node", type=int, default=None, help="CPUs per node for Ray (default: the spec's cpus_per_node, else what SLURM gives)."),
        click.option("-t", "--time", default=None, metavar="TIME", help="Time limit, e.g. 30, 1:00:00, 2-00:00:00."),
        click.option("-p", "--partition", default=None, help="Partition (default: the spec's)."),
        click.option("-A", "--account", default=None, help="Account (default: the spec's)."),
        click.option("-J", "--name", default=None, help="Job name, also the job dir's parent (default: the experiment's file name)."),
        click.option("--container-image", default=None, metavar="IMAGE", help="Override the spec's cpu_image/gpu_image."),
        click.option("--port-base", type=int, default=None, help="Pin the Ray daemons' ports to PORT..PORT+9 (default: free ports picked on each node at start)."),
        click.option("--ready-timeout", "ready_timeout_s", type=float, default=180.0, show_default=True, help="Seconds for all nodes to join before the job fails."),
        click.option("--oversubscribe", is_flag=True, help="Let other jobs share this job's nodes (sbatch --oversubscribe)."),
        click.option("--signal", default="B:USR2@120", show_default=True, help="Warning signal before the time limit; the driver gets it via slurm_rl.on_preempt(callback). Never USR1 (NCCL's)."),
        click.option("--requeue", type=int, default=0, show_default=True, help="Requeue a failed job (driver exit != 0, lost node) up to this many times."),
        click.option("--min-nodes", type=int, default=None, metavar="K", help="Go on once K nodes are up (default: all); the rest join later."),
        click.option("--head-node", type=click.Choice(["shared", "cpu"]), default="shared", show_default=True, help="cpu: one more node runs only the Ray head and the driver (no CPUs/GPUs for Ray work)."),
        click.option("--head-partition", default=None, metavar="PARTITION", help="The CPU head's partition (default: the spec's head_partition): one heterogeneous job, head + --nodes workers."),
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




def spec_option() -> Callable[..., Any]:
    return click.option("--spec", "spec_flag", metavar="PATH", help=f"Cluster spec (default: ${SPEC_ENV_VAR}).")
