"""What every `slurm-rl` command shares: error handling, the job flags, spec resolution."""

from __future__ import annotations

import json
import os
import signal
import sys
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from ...config.spec import SPEC_ENV_VAR, ClusterSpec, load_spec, resolve_spec_path
from ...core.errors import SlurmRlError, UsageError
from ...core.options import JobOptions
from ...core.paths import current_user
from ..submission.flags import flag_fields
from ..submission.resolve import resolve_options
from .job_command import CONTEXT, spec_option

__all__ = ["CONTEXT", "spec_option"]  # the commands' shared pieces, owned by session.py


def stopped_following(what: str) -> typing.NoReturn:
    """Ctrl-C while a command follows a job: the following stops, never the job. One line on
    stderr, then exit 130 at once. Left to Python's own exit, the process sometimes ended by
    SIGINT instead (-2 to its parent, not 130: 3 of 86 Ctrl-Cs that landed 0-90 ms after
    "Submitted job"); and a second Ctrl-C during the interpreter's teardown printed a traceback."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    click.echo(f"\nslurm-rl: {what}", err=True)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(130)


def _err(msg: str) -> None:
    click.echo(f"slurm-rl: error: {msg}", err=True)


def _split_positionals(
    items: tuple[str, ...], spec_flag: str | None
) -> tuple[ClusterSpec, str | None, tuple[str, ...]]:
    """[SPEC.json] [EXPERIMENT [ARGS...]] -> (spec, experiment or None: interactive, args)."""
    spec_path = spec_flag
    rest = list(items)
    if rest and rest[0].endswith(".json"):
        spec_path = rest.pop(0)
    if not rest and resolve_spec_path(spec_path) is None:
        raise click.UsageError(
            "give an experiment (and a cluster spec): slurm-rl submit SPEC.json EXPERIMENT [-- ARGS]"
        )
    misplaced = next((a for a in rest[1:] if a.endswith(".json") and _looks_like_spec(a)), None)
    if misplaced is not None and spec_path is None:
        raise UsageError(
            f"{misplaced} is a cluster spec after the experiment {rest[0]}, where it would be one of the "
            f"experiment's arguments; put the spec first: slurm-rl submit {misplaced} {rest[0]} ..."
        )
    return load_spec(spec_path), (rest[0] if rest else None), tuple(rest[1:])


def _looks_like_spec(path: str) -> bool:
    """A JSON file with a cluster spec's required keys (cluster_name and fileroot)."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and {"cluster_name", "fileroot"} <= set(data)


def _with(decorators: list[Callable[..., Any]], f: Callable[..., Any]) -> Callable[..., Any]:
    """Apply click decorators listed top to bottom, as if stacked above ``f``."""
    for d in reversed(decorators):
        f = d(f)
    return f


def _click_type(annotation: Any) -> Any:
    """The click type of an option field: int, float, str, or a choice for a Literal."""
    while typing.get_origin(annotation) is typing.Annotated:
        annotation = typing.get_args(annotation)[0]
    if typing.get_origin(annotation) is tuple:
        return tuple
    args = [a for a in typing.get_args(annotation) if a is not type(None)] or [annotation]
    inner = args[0]
    if typing.get_origin(inner) is typing.Literal:
        return click.Choice([str(a) for a in typing.get_args(inner)])
    while typing.get_origin(inner) is typing.Annotated:
        inner = typing.get_args(inner)[0]
    return {int: int, float: float, bool: bool}.get(inner, str)


def option_flags() -> list[Callable[..., Any]]:
    """One click option per flag field of JobOptions (core/options.py), help and default from it.

    Every default is None here: an unset flag lets the spec's value, then the model's default,
    apply (resolve_options); the help text shows the model's default."""
    out = []
    for name, meta in flag_fields().items():
        annotation = JobOptions.model_fields[name].annotation
        ctype = _click_type(annotation)
        default = meta["default"]
        shown = "" if default in (None, "", False, ()) else f" [default: {default}]"
        spec_note = " [default: the spec's, if set]" if meta["spec"] and default in (None, 0) else ""
        kwargs: dict[str, Any] = {"default": None, "help": f"{meta['help']}{shown or spec_note}"}
        if ctype is bool:
            kwargs["is_flag"] = True
        elif ctype is tuple:  # repeatable: --sbatch-arg A --sbatch-arg B
            kwargs.update(multiple=True, type=str, metavar=meta["metavar"])
        else:
            kwargs["type"] = ctype
            if meta["metavar"]:
                kwargs["metavar"] = meta["metavar"]
        out.append(click.option(*meta["flags"], name, **kwargs))
    return out


def job_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """Flags shared by `render` and `submit`: the positionals, --spec, and every option field."""
    return _with(
        [
            click.argument("args", nargs=-1, type=click.UNPROCESSED, metavar="[SPEC.json] [EXPERIMENT [-- ARGS...]]"),
            click.option(
                "--spec",
                "spec_flag",
                metavar="PATH",
                help=f"Cluster spec (else first argument if it ends in .json, else ${SPEC_ENV_VAR}).",
            ),
            *option_flags(),
        ],
        f,
    )


def resolve_submission(kw: dict[str, Any]) -> tuple[ClusterSpec, JobOptions]:
    spec, experiment, args = _split_positionals(kw.pop("args"), kw.pop("spec_flag"))
    return spec, resolve_options(spec, experiment, experiment_args=args, user=current_user(), **kw)


class Main(click.Group):
    def main(self, *args: Any, **kwargs: Any) -> Any:  # one place turns our errors into exit codes
        try:
            return super().main(*args, standalone_mode=False, **kwargs)  # type: ignore[call-overload]
        except click.exceptions.Exit as exc:
            sys.exit(exc.exit_code)
        except click.UsageError as exc:  # click's own checks: one line naming the flag, as ours
            where = exc.ctx.command_path if exc.ctx else "slurm-rl"
            _err(f"{' '.join(exc.format_message().split())} (see `{where} --help`)")
            sys.exit(2)
        except click.ClickException as exc:
            exc.show()
            sys.exit(exc.exit_code)
        except click.exceptions.Abort:
            _err("aborted")
            sys.exit(130)
        except SlurmRlError as exc:
            _err(str(exc))
            sys.exit(exc.exit_code)
