"""The lab's ordinary users (tests/lab/slurm-lab-users.sh): `slurm-rl` run as one of them, and
what root (the site's administrator) sees of their jobs on the nodes."""

from __future__ import annotations

import json
import pwd
import shlex
import subprocess
import sys
from pathlib import Path

from tests.conftest import LAB, REPO, user_argv
from tests.lab.helpers import EXPERIMENTS, SPEC

USER = "srl-user"  # the one whose jobs the tests watch
OTHER = "srl-other"  # the neighbour on the same nodes, and the attacker


def home(user: str) -> str:
    return pwd.getpwnam(user).pw_dir


def uid(user: str) -> int:
    return pwd.getpwnam(user).pw_uid


def as_user(user: str, argv: list[str], umask: str | None = None) -> list[str]:
    """``argv`` run as ``user`` the way a login shell would set it up (tests/conftest.py's
    user_argv); under ``umask`` when given."""
    if umask is not None:
        argv = ["sh", "-c", f"umask {umask} && exec {shlex.join(argv)}"]
    return user_argv(user, argv)


def run_as(
    user: str, *args: str, timeout: float = 120, umask: str | None = None, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    """`slurm-rl ARGS` as ``user``, from the checkout."""
    return subprocess.run(
        as_user(user, [sys.executable, "-m", "slurm_rl", *args], umask),
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO,
        input=stdin,
        check=False,
    )


def start_as(user: str, experiment: str, *args: str, nodes: int = 3, extra: tuple[str, ...] = (), **kw: str) -> dict:
    """`slurm-rl submit --json` as ``user`` without waiting; its JSON line."""
    res = run_as(
        user, "submit", SPEC, str(EXPERIMENTS / experiment), "--nodes", str(nodes), "--json", *extra, "--", *args, **kw
    )
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout.splitlines()[-1])


def in_node(node: str, script: str, timeout: float = 60) -> str:
    """A shell script run as root inside a lab node (the administrator's view); its stdout."""
    res = subprocess.run(
        [str(LAB), "exec", node, "--", "sh", "-c", script], capture_output=True, text=True, timeout=timeout
    )
    assert res.returncode == 0, res.stderr
    return res.stdout


def job_process_owners(node: str, job_id: int) -> list[tuple[int, str]]:
    """(real uid, command) of each process of the job on ``node``: its marker in the
    environment or its temp dir in the command line (tests/lab/helpers.py's rule), as root sees."""
    out = in_node(
        node,
        "for p in /proc/[0-9]*; do "
        f"if tr '\\0' '\\n' < $p/environ 2>/dev/null | grep -qx SLURM_RL_JOB_ID={job_id} || "
        f"tr '\\0' ' ' < $p/cmdline 2>/dev/null | grep -q srl-{job_id}; then "
        "echo \"$(awk '/^Uid:/{print $2}' $p/status) $(tr '\\0' ' ' < $p/cmdline | cut -c1-100)\"; fi; done",
    )
    owners = []
    for line in out.splitlines():
        who, _, command = line.partition(" ")
        if who.isdigit() and "sh -c" not in command and "grep" not in command and "awk" not in command:
            owners.append((int(who), command))
    return owners


def files_not_owned_by(node: str, paths: list[str], user: str) -> list[str]:
    """Files under ``paths`` on ``node`` that are not ``user``'s (missing paths are skipped)."""
    quoted = " ".join(shlex.quote(p) for p in paths)
    return in_node(
        node, f'for d in {quoted}; do [ -e "$d" ] && find "$d" ! -user {uid(user)} -printf \'%u %p\\n\'; done; true'
    ).splitlines()


def release(data: dict, user: str) -> None:
    """hold.py's release file, written by the job's own user (root writes nothing into a job dir)."""
    subprocess.run(as_user(user, ["touch", str(Path(data["job_dir"]) / "release")]), check=True, timeout=30)
