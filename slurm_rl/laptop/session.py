"""A laptop's session with the login node: one probe that checks slurm-rl there (present, the
same version) and the user's fileroot, and leaves the spec there; then uploads (code going with
a job) and downloads (results). Every check fails as one line naming the fix."""

from __future__ import annotations

import io
import json
import shlex
import tarfile
import uuid
from dataclasses import dataclass
from pathlib import Path

from .._version import __version__
from .ssh import Login, LoginError

# Runs on the login node with the spec's interpreter: slurm-rl's version (None: not installed),
# the user, the fileroot expanded there, whether it is writable, and the spec written under it.
_PROBE = r"""
import getpass, hashlib, json, os, sys
try:
    import slurm_rl
    version = slurm_rl.__version__
except Exception:
    version = None
root, spec = sys.argv[1], sys.stdin.read()  # the spec on stdin: its env never in a process list
root = os.path.normpath(os.path.expanduser(os.path.expandvars(root))) if root else ""
user = getpass.getuser()
mine = os.path.join(root, user, ".laptop") if root else ""
writable, spec_path = False, ""
if mine:
    try:
        os.makedirs(os.path.join(mine, "specs"), exist_ok=True)
        writable = os.access(mine, os.W_OK)
    except OSError:
        pass
if spec and writable:
    spec_path = os.path.join(mine, "specs", hashlib.sha256(spec.encode()).hexdigest()[:16] + ".json")
    if not os.path.exists(spec_path):
        with open(spec_path + ".tmp", "w") as f:
            f.write(spec)
        os.replace(spec_path + ".tmp", spec_path)
print(json.dumps({"version": version, "user": user, "fileroot": root, "writable": writable,
                  "dir": mine, "spec": spec_path}))
"""


@dataclass(frozen=True)
class Remote:
    """What the probe found: the login node, its interpreter with slurm-rl, the user there, the
    user's laptop dir under the fileroot, and the spec's copy there ("" if no spec)."""

    login: Login
    python: str
    user: str
    fileroot: str
    writable: bool
    dir: str
    spec: str

    def slurm_rl(self, argv: list[str]) -> list[str]:
        """The remote command for ``slurm-rl ARGV`` there (never forwarding again)."""
        return ["env", "-u", "SLURM_RL_LOGIN", self.python, "-m", "slurm_rl", *argv]

    def require_writable(self) -> None:
        if not self.writable:
            raise LoginError(
                f"the fileroot {self.fileroot or '(none in the spec)'} on {self.login.target} is not writable by "
                f"{self.user}: code cannot be copied there; fix its permissions or the spec's fileroot"
            )

    def upload(self, files: dict[str, Path], snapshot: bool) -> str:
        """Copy ``files`` (name in the upload -> local path) into a fresh dir under the user's
        laptop dir; a snapshot's dir becomes a git repository there (what --snapshot copies)."""
        self.require_writable()
        target = f"{self.dir}/uploads/{uuid.uuid4().hex[:12]}"
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w:gz") as tar:
            for name, path in files.items():
                tar.add(path, arcname=name, recursive=False)
        script = f"mkdir -p {shlex.quote(target)} && tar -xzf - -C {shlex.quote(target)}"
        if snapshot:
            repo = shlex.quote(f"{target}/repo")
            script += f" && git -C {repo} init -q && git -C {repo} add -A"
        res = self.login.run(["sh", "-c", script], stdin=buf.getvalue(), timeout=600)
        if res.returncode != 0:
            said = res.stderr.decode(errors="replace").strip().splitlines()
            raise LoginError(
                f"copying the code to {self.login.target}:{target} failed: {said[-1] if said else res.returncode}"
            )
        return target


def connect(login: Login, python: str, fileroot: str, spec_text: str) -> Remote:
    """Probe the login node (one ssh command over the shared connection)."""
    res = login.run([python, "-c", _PROBE, fileroot], stdin=spec_text.encode())
    install = f"pip install slurm-rl=={__version__} into it (`{python} -m pip install slurm-rl=={__version__}`)"
    if res.returncode == 127:  # the shell's "command not found"
        raise LoginError(
            f"slurm-rl is not installed on {login.target}: no interpreter {python} there; set the spec's "
            f'"login_python" to one that has slurm-rl, or {install}'
        )
    try:
        found = json.loads(res.stdout.decode().strip().splitlines()[-1])
    except (ValueError, IndexError):
        said = res.stderr.decode(errors="replace").strip().splitlines()
        raise LoginError(f"{python} on {login.target} failed: {said[-1] if said else res.returncode}") from None
    if found["version"] is None:
        raise LoginError(f"slurm-rl is not installed in {python} on {login.target}: {install}")
    if found["version"] != __version__:
        raise LoginError(
            f"slurm-rl {found['version']} on {login.target} ({python}), {__version__} here: they must match; "
            f"{install}, or `pip install slurm-rl=={found['version']}` here"
        )
    return Remote(login, python, found["user"], found["fileroot"], found["writable"], found["dir"], found["spec"])


def laptop_spec_text(path: str | None) -> tuple[dict[str, object], str]:
    """A spec file as the login node should see it: its raw JSON (paths expand there), without
    the laptop-only fields; ({}, "") for no spec."""
    if not path:
        return {}, ""
    raw = json.loads(Path(path).read_text())
    remote = {k: v for k, v in raw.items() if k not in ("login", "login_python")}
    return raw, json.dumps(remote, indent=2, sort_keys=True)
