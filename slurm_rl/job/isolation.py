"""An isolated service instance (a part's ``isolated: true``, the default for a part with an image
of its own): sandboxes run model-written code as the job's own user, so that code must not reach
what the job's user can. Each instance starts under ``unshare`` (util-linux, in every image
slurm-rl runs in) in namespaces of its own:

- a PID namespace with its own ``/proc``: no other process of the node is visible, so another
  process's ``/proc/PID/environ`` (the Ray token of the job's daemons) or ``/proc/PID/root`` is
  out of reach, and nothing outside can be signalled by PID;
- a mount namespace in which the user's directory of the fileroot (every job dir, every job's
  Ray token), the node-local root (every job's Ray sessions and sockets) and the home's
  credential dirs (``~/.ssh`` and the like) are empty tmpfs, the rest of the home is read-only
  (nothing planted in ``~/.bashrc``), and only the instance's own directory
  (``$SLURM_RL_SERVICE_DIR``, writable) and the service's code directory (read-only) are put
  back at their paths;
- for a user other than root, a user namespace mapping the user to root inside it (what lets it
  mount), the same user outside;
- an environment without the job's Ray address or token (``RAY_*``, ``SLURM_RL_*``: service_instances.py).

When the PID namespace's first process ends, the kernel ends every process in it, and
``--kill-child`` ends that one when ``unshare`` is killed: an instance leaves nothing behind. A
node that refuses the namespaces (a kernel or policy without unprivileged user namespaces) makes
the instance exit at once with unshare's own message in its log, which the service's failure
then quotes: an isolated part never runs unisolated."""

from __future__ import annotations

import os
from collections.abc import Iterable

# $1 own dir, $2 code dir ("" when none), $3 home ("" when none), $4 the command; then the dirs
# to hide. The home is made read-only first (the hiding of its credential dirs then sits on it);
# the kept dirs are held open (fds 3, 4) before the hiding covers their paths, then bound back
# from those fds: no staging dir is made anywhere.
SETUP = r"""set -e
own=$1 code=$2 home=$3 cmd=$4; shift 4
hide() { [ ! -d "$1" ] || mount -t tmpfs -o size=64m,mode=1777 slurm-rl-hidden "$1"; }
exec 3<"$own" 4<"${code:-$own}"
if [ -n "$home" ] && [ -d "$home" ]; then
  mount --bind "$home" "$home"
  mount -o remount,bind,ro "$home"
fi
for d in "$@"; do hide "$d"; done
mkdir -p "$own"
mount --no-canonicalize --bind /proc/self/fd/3 "$own"
if [ -n "$code" ]; then
  mkdir -p "$code"
  mount --no-canonicalize --bind /proc/self/fd/4 "$code"
  for d in "$@"; do case "$d" in "$code"/*) hide "$d" ;; esac; done  # what the code dir holds of them
  mount -o remount,bind,ro "$code"
fi
exec 3<&- 4<&-
cd "${code:-$own}"
exec bash -c "$cmd"
"""
# where a home keeps credentials: hidden from an isolated instance (the rest of the home stays,
# read-only, so the user's own Python, conda or pyenv still run)
CREDENTIALS = (".ssh", ".gnupg", ".aws", ".azure", ".kube", ".docker", ".config/gcloud", ".cache/huggingface")


def isolated_argv(command: str, own_dir: str, code_dir: str, home: str, hide: Iterable[str]) -> list[str]:
    """The argv that runs ``command`` (a shell line) isolated: ``own_dir`` its only writable
    place besides the hidden dirs' empty stand-ins, ``code_dir`` (may be "") read-only, ``home``
    (may be "") read-only, every dir in ``hide`` empty."""
    hidden = sorted({os.path.normpath(d) for d in hide if d and os.path.normpath(d) != "/"}, key=len)
    user = [] if os.geteuid() == 0 else ["--user", "--map-root-user"]
    home = "" if not home or os.path.normpath(home) == "/" else home
    return [
        "unshare", *user, "--mount", "--propagation", "private", "--pid", "--fork", "--mount-proc", "--kill-child",
        "bash", "-c", SETUP, "slurm-rl-isolate", own_dir, code_dir, home, command, *hidden,
    ]  # fmt: skip


def hidden_dirs(job_dir: str, node_local_root: str, home: str | None) -> list[str]:
    """What an isolated instance must not see: the user's dir of the fileroot (``<fileroot>/
    <user>``: every job dir and token of the user), the node-local root (every job's Ray
    temp dir, sockets included) and the home's credential dirs (keys, cloud logins)."""
    user_dir = os.path.dirname(os.path.dirname(os.path.normpath(job_dir)))
    creds = [os.path.join(home, c) for c in CREDENTIALS] if home else []
    return [d for d in (user_dir, node_local_root, *creds) if d]


def code_dir_for(workdir: str, job_dir: str) -> str:
    """The code an isolated instance may read: the service's working directory, unless that is
    the job dir itself (a container job without ``--workdir``): then none."""
    if not workdir or os.path.normpath(workdir) == os.path.normpath(job_dir):
        return ""
    return workdir
