"""A laptop for the lab's login node: `slurm-rl` run where SLURM cannot be reached. Each command
runs in its own mount namespace in which every SLURM command is /dev/null (not found by PATH,
not runnable by path), the munge socket dir and /etc/slurm are empty, and the cluster's fileroot
is an empty directory; HOME is the test's, with an ~/.ssh/config that names the login node
(`Host login`: the lab's key for root, or, when SLURM_RL_TEST_USER names an ordinary user of the
lab, that user's own key, and the laptop's commands run as that user too; known hosts in HOME).
So whatever works went over ssh."""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import sys
from pathlib import Path

from tests.conftest import LAB, REPO, hand_to, user_argv
from tests.lab.helpers import SPEC, STATE

SLURM_COMMANDS = (
    "sbatch srun salloc squeue scancel scontrol sacct sacctmgr sinfo sstat sprio sshare sdiag sreport strigger "
    "sattach sbcast munge unmunge"
)
HIDE = r"""set -e
for d in /usr/bin /usr/sbin /usr/local/bin; do
  for c in $SLURM_COMMANDS; do if [ -e "$d/$c" ]; then mount --bind /dev/null "$d/$c"; fi; done
done
mount -t tmpfs laptop /run/munge
mount -t tmpfs laptop /etc/slurm
mkdir -p "$FILEROOT"; mount -t tmpfs laptop "$FILEROOT"
exec "$@"
"""


def login_key() -> Path:
    """The lab's key for root@login (`slurm-lab login-key`); brings the login node up if the lab
    runs without it (CI's lab has it from the start)."""
    res = subprocess.run([str(LAB), "login-key"], capture_output=True, text=True, timeout=30)
    if res.returncode != 0:
        saved = (STATE / "run" / "up-args").read_text().split()
        up = subprocess.run([str(LAB), "up", *saved, "--login"], capture_output=True, text=True, timeout=900)
        assert up.returncode == 0, up.stderr
        res = subprocess.run([str(LAB), "login-key"], capture_output=True, text=True, timeout=30)
    assert res.returncode == 0, res.stderr
    return Path(res.stdout.strip())


class Laptop:
    def __init__(self, home: Path) -> None:
        self.home = home
        self.user = os.environ.get("SLURM_RL_TEST_USER") or None  # whom the laptop's commands run as
        self.remote_user = self.user or "root"  # whom the login node sees
        ssh = home / ".ssh"
        ssh.mkdir(parents=True, mode=0o700)
        key = ssh / "id_lab"
        own_key = Path(pwd.getpwnam(self.user).pw_dir, ".ssh", "id_ed25519") if self.user else None
        shutil.copy(own_key or login_key(), key)  # a lab user's key: the login node accepts it (slurm-lab user)
        key.chmod(0o600)
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(ssh / "id_stranger")], check=True)
        self.logins = {"login": key}  # the login hosts this laptop reaches, each with its key
        self._write_ssh_config()
        self.fileroot = json.loads(Path(SPEC).read_text())["fileroot"]
        self.spec = self.write_spec("laptop.json")

    def _write_ssh_config(self) -> None:
        ssh = self.home / ".ssh"
        hosts = "".join(f"Host {host}\n  IdentityFile {key}\n" for host, key in self.logins.items())
        (ssh / "config").write_text(
            f"Host login-stranger\n  HostName login\n  IdentityFile {ssh}/id_stranger\n{hosts}"
            f"Host *\n  User {self.remote_user}\n  UserKnownHostsFile {ssh}/known_hosts\n"
            "  StrictHostKeyChecking accept-new\n  IdentitiesOnly yes\n"
        )

    def reach(self, host: str, root_key: Path) -> None:
        """Another login host (lab b's own, `blogin`): the user's own key, or root's for it."""
        key = self.home / ".ssh" / f"id_{host}"
        shutil.copy(self.home / ".ssh" / "id_lab" if self.user else root_key, key)
        key.chmod(0o600)
        self.logins[host] = key
        self._write_ssh_config()

    def write_spec(self, name: str, **fields: object) -> Path:
        """The lab's spec as a laptop holds it: the login node named, and its slurm-rl (this venv's
        interpreter, on the shared filesystem)."""
        data = {**json.loads(Path(SPEC).read_text()), "login": "login", "login_python": sys.executable, **fields}
        path = self.home / name
        path.write_text(json.dumps(data))
        return path

    def _env(self) -> dict[str, str]:
        return {
            "HOME": str(self.home),
            "PATH": f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin",
            "SLURM_COMMANDS": SLURM_COMMANDS,
            "FILEROOT": self.fileroot,
            "LANG": "C.UTF-8",
            "SLURM_RL_SSH_CONFIG": str(self.home / ".ssh" / "config"),  # ssh reads ~ from passwd, not $HOME
            "CLUSTER_SPEC_PATH": str(self.spec),  # the laptop's spec: commands without SPEC use it
        }

    def _argv(self, args: tuple[str, ...], python_args: tuple[str, ...] = ("-m", "slurm_rl")) -> list[str]:
        """The laptop's `python PYTHON_ARGS ARGS`: in its own mount namespace (made as root), then,
        when the laptop has a user, as that user in the laptop's HOME (handed to it first)."""
        hide = ["unshare", "--mount", "--propagation", "private", "sh", "-c", HIDE, "laptop"]
        argv = [sys.executable, *python_args, *args]
        if self.user is None:
            return [*hide, *argv]
        hand_to(self.home, self.user)
        return [*hide, *user_argv(self.user, argv, self._env())]

    def run(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        """`slurm-rl ARGS` on the laptop."""
        return subprocess.run(
            self._argv(args),
            capture_output=True,
            text=True,
            env=self._env(),
            cwd=self.home,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )

    def popen(self, *args: str) -> subprocess.Popen[str]:
        """`slurm-rl ARGS` on the laptop, left running (its stdout and stderr piped)."""
        return subprocess.Popen(
            self._argv(args),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=self._env(),
            cwd=self.home,
            stdin=subprocess.DEVNULL,
        )

    def close(self) -> None:
        """End the shared ssh connection (the laptop's own `ssh -O exit`)."""
        stop = f"from slurm_rl.laptop.ssh import Login; [Login(h).close() for h in {sorted(self.logins)!r}]"
        subprocess.run(self._argv((), ("-c", stop)), env=self._env(), capture_output=True, timeout=60)


def accepted_logins() -> int:
    """How many logins the login node's sshd accepted since it started."""
    log = STATE / "log" / "login-sshd.log"
    return log.read_text(errors="replace").count("Accepted publickey") if log.exists() else 0


REPO_EXAMPLE = REPO / "examples" / "grpo.py"
