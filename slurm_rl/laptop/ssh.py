"""The one door to the login node: the system `ssh` (so ~/.ssh/config applies: ProxyJump,
identities, ports), one ControlMaster connection per login kept for a while, so that a site
with MFA asks once and every later command rides on that connection. No daemon of ours: the
master is ssh's own. An ssh failure becomes one line and exit 2 (nothing was run)."""

from __future__ import annotations

import hashlib
import os
import shlex
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ..core.errors import UsageError
from ..core.job_env import CONTROL_DIR_ENV, SSH_CONFIG_ENV, Settings  # noqa: F401 - importable here as before

PERSIST_S = 600  # the master outlives the last command by this long
CONNECT_TIMEOUT_S = 15
SSH_FAILED = 255  # ssh's own exit status for its errors (a remote command's is passed through)

_UNREACHABLE = (
    "Could not resolve hostname",
    "Connection refused",
    "Connection timed out",
    "timed out",
    "No route to host",
    "Network is unreachable",
    "Connection closed",
    "Connection reset",
)
_AUTH = ("Permission denied", "Too many authentication failures", "Authentication failed")


class LoginError(UsageError):
    """The login node could not be used: unreachable, authentication, slurm-rl missing there."""


SOCKET_PATH_MAX = 100  # a Unix socket path is at most 107 bytes, and ssh adds 17 while it makes one


def control_path(target: str) -> str:
    """The ControlMaster socket of ``target``: ~/.cache/slurm-rl/ssh/<hash> (or $SLURM_RL_SSH_DIR),
    or /tmp/slurm-rl-ssh-<uid>/<hash> where that path is too long for a socket."""
    name = hashlib.sha256(target.encode()).hexdigest()[:16]
    d = Path(Settings.current().ssh_dir or Path.home() / ".cache" / "slurm-rl" / "ssh")
    if len(f"{d}/{name}") + 17 > SOCKET_PATH_MAX:
        d = Path(tempfile.gettempdir()) / f"slurm-rl-ssh-{os.getuid()}"
    d.mkdir(parents=True, exist_ok=True, mode=0o700)
    if d.stat().st_uid != os.getuid() or d.stat().st_mode & 0o077:
        raise LoginError(f"{d} must be yours and private (mode 700) to hold ssh's shared connection; fix or remove it")
    return f"{d}/{name}"


@dataclass(frozen=True)
class Login:
    """A login node as ssh names it: ``user@host``, ``host``, or a ~/.ssh/config Host alias."""

    target: str

    def ssh_argv(self, *, tty: bool = False, extra: tuple[str, ...] = ()) -> list[str]:
        opts = {
            "ControlMaster": "auto",
            "ControlPath": control_path(self.target),
            "ControlPersist": str(PERSIST_S),
            "ConnectTimeout": str(CONNECT_TIMEOUT_S),
            "ServerAliveInterval": "30",
        }
        if not sys.stdin.isatty():  # no one to answer a prompt: fail at once instead of hanging
            opts["BatchMode"] = "yes"
        argv = ["ssh", *(a for k, v in opts.items() for a in ("-o", f"{k}={v}"))]
        if config := Settings.current().ssh_config:
            argv[1:1] = ["-F", config]
        return [*argv, "-tt" if tty else "-T", *extra, self.target]

    def command_argv(self, remote: list[str], *, tty: bool = False) -> list[str]:
        """ssh running ``remote`` (one argv, quoted for the remote shell) on the login node."""
        return [*self.ssh_argv(tty=tty), shlex.join(remote)]

    def run(
        self, remote: list[str], *, stdin: bytes | None = None, timeout: float = 120
    ) -> subprocess.CompletedProcess[bytes]:
        """Run and capture; an ssh failure raises LoginError, the remote command's exit is returned."""
        try:
            res = subprocess.run(self.command_argv(remote), input=stdin, capture_output=True, timeout=timeout)
        except FileNotFoundError:
            raise LoginError(
                "no `ssh` command here: install the OpenSSH client (e.g. apt install openssh-client)"
            ) from None
        except subprocess.TimeoutExpired:
            raise LoginError(f"{self.target}: no answer within {timeout:g} s; is the login node up?") from None
        if res.returncode == SSH_FAILED:
            self.raise_for(res.stderr.decode(errors="replace"))
        return res

    def stream(self, remote: list[str], *, tty: bool = False) -> int:
        """Run with this terminal's streams (a terminal there too with ``tty``); the remote exit code."""
        return subprocess.call(self.command_argv(remote, tty=tty))

    def raise_for(self, stderr: str) -> None:
        lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
        said = lines[-1] if lines else "no message"
        if any(m in stderr for m in _AUTH):
            raise LoginError(
                f"login node {self.target}: authentication failed ({said}); check that `ssh {self.target}` "
                f"logs in (a key in ~/.ssh/config or ssh-agent; at an MFA site run it once in a terminal)"
            )
        if "Host key verification failed" in stderr:
            raise LoginError(
                f"login node {self.target}: its host key is not known or has changed; run `ssh {self.target}` "
                f"once in a terminal to check and accept it"
            )
        if any(m in stderr for m in _UNREACHABLE):
            raise LoginError(f"login node {self.target} is unreachable ({said}); check the name, the network or VPN")
        raise LoginError(f"ssh to login node {self.target} failed: {said}")

    def close(self) -> None:
        """Stop the shared connection (`ssh -O exit`); nothing if none runs."""
        subprocess.run([*self.ssh_argv(extra=("-O", "exit"))], capture_output=True, timeout=30)
