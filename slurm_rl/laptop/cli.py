"""`slurm-rl` as typed anywhere: the login side's commands; a RemoteCommand's (every job command,
submit, render, sweep, doctor, images) --login, $SLURM_RL_LOGIN, or the spec's "login" on a
machine without SLURM name a login node, and the command runs there over ssh (forward.py), else
here as before. This entry point hands the commands its forwarder (login/commands/job_command.py)."""

from __future__ import annotations

from typing import Any

import click

from ..core.job_env import Settings
from ..login.cli import cli
from ..login.commands.job_command import LOCAL, Forwarder
from ..login.commands.job_remote import pinned_params
from ..slurm.runner import client_installed
from .forward import capture, forward, spec_path_of


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


class LoginForwarder(Forwarder):
    """Every RemoteCommand (login/commands/job_command.py) asks this one where to run."""

    def target(self, name: str, flag: str | None, params: dict[str, Any]) -> str | None:
        if flag is None and Settings.current().login is None:  # a job of a named cluster: its login node
            flag = pinned_params(click.get_current_context(), params, flag)
        return login_target(name, flag, params)

    def forward(self, name: str, command: click.Command, params: dict[str, Any], target: str) -> int:
        return forward(name, command, params, target)

    def capture(self, name: str, command: click.Command, params: dict[str, Any], target: str) -> tuple[int, str, str]:
        return capture(name, command, params, target)


def main() -> None:
    cli(prog_name="slurm-rl", obj=LoginForwarder())
