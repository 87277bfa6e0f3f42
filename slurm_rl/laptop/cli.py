"""`slurm-rl` as typed anywhere: the login side's commands, each with --login; where a login node
is named (--login, $SLURM_RL_LOGIN, or the spec's "login" on a machine without SLURM) the command
runs there over ssh (forward.py), else here as before."""

from __future__ import annotations

import functools
import sys
from typing import Any

import click

from ..core.job_env import LOGIN_ENV, Settings
from ..login.cli import cli
from ..slurm.runner import client_installed
from .forward import forward, spec_path_of

LOCAL = "local"  # --login local: run here even if the spec names a login node
# what runs on the login node from a laptop; `run` (no SLURM) and `spec` (a local file) stay here
FORWARDED = (
    "submit", "render", "sweep", "sweep-summary", "status", "list", "logs", "plot", "attach",
    "stacks",    "teardown", "cancel", "grow", "shrink", "doctor", "fetch", "dashboard",
)  # fmt: skip


def login_target(name: str, flag: str | None, params: dict[str, Any]) -> str | None:
    """Where the command runs: --login, else $SLURM_RL_LOGIN, else the spec's "login" where
    this machine has no SLURM client (on the login node itself the spec's login is ignored)."""
    chosen = flag if flag is not None else Settings.current().login
    if chosen is not None:
        return None if chosen in ("", LOCAL) else chosen
    if client_installed():
        return None
    path = spec_path_of(name, params)
    if not path:
        return None
    from .session import laptop_spec_text

    try:
        login = laptop_spec_text(path)[0].get("login")
    except (OSError, ValueError):
        return None  # the command's own spec check names the problem
    return str(login) if login else None


def _remote_capable(name: str, command: click.Command) -> None:
    command.params.append(
        click.Option(
            ["--login"],
            metavar="[USER@]HOST",
            default=None,
            help=f'Run on this login node over ssh (default: ${LOGIN_ENV}, else the spec\'s "login" '
            f"where no SLURM is installed here; '{LOCAL}': here).",
        )
    )
    local = command.callback
    assert local is not None  # every forwarded command has one

    @functools.wraps(local)
    def callback(**params: Any) -> Any:
        target = login_target(name, params.pop("login", None), params)
        if target is None:
            return local(**params)
        sys.exit(forward(name, command, params, target))

    command.callback = callback


for _name in FORWARDED:
    _remote_capable(_name, cli.commands[_name])
for _name, _sub in cli.commands["images"].commands.items():  # type: ignore[attr-defined]
    _remote_capable(f"images {_name}", _sub)


def main() -> None:
    cli(prog_name="slurm-rl")
