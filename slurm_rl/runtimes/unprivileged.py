"""What a container runtime needs of a node when the job's user is not root, as `doctor --probe`
checks it on the bare node (before any container starts): user namespaces (enroot always; an
Apptainer without its setuid starter), FUSE for an image mount by the user (``/dev/fuse`` open
to the user: Apptainer's squashfuse runs in its user namespace and opens it itself), and
enroot's runtime, cache and data paths writable by the user (enroot's own configuration,
evaluated as enroot evaluates it). One line each for what is missing, with what the site changes."""

from __future__ import annotations

import json

from ..core.checks import Check

NEEDS_PREFIX = "SLURM_RL_NEEDS "

# Plain shell on the bare node: prints NEEDS_PREFIX + JSON.
NEEDS_SHELL = f"""set -u
uid=$(id -u)
userns=false; unshare --user --map-root-user true 2>/dev/null && userns=true
max=$(cat /proc/sys/user/max_user_namespaces 2>/dev/null || echo '?')
fuse=false; [ -r /dev/fuse ] && [ -w /dev/fuse ] && fuse=true
creatable() {{  # the path, or its first existing ancestor, is a directory this user may write
  local p=$1
  while [ ! -e "$p" ] && [ "$p" != / ]; do p=$(dirname "$p"); done
  [ -d "$p" ] && [ -w "$p" ] && [ -x "$p" ]
}}
enroot_paths() {{  # in a subshell: enroot's config exports ENROOT_* and XDG_* as it evaluates
  local enroot v p ok out=""
  enroot=$(command -v enroot) || return 0
  eval "$(sed -n '/^# -* *BEGIN CONFIG/,/^# -* *END CONFIG/p' "$enroot")" >/dev/null 2>&1
  for v in ENROOT_RUNTIME_PATH ENROOT_CACHE_PATH ENROOT_DATA_PATH; do
    p=${{!v:-}}; ok=false; [ -n "$p" ] && creatable "$p" && ok=true
    out="$out${{out:+, }}\\"$v\\": [\\"$p\\", $ok]"
  done
  printf '%s' "$out"
}}
paths=$(enroot_paths)
echo "{NEEDS_PREFIX}{{\\"uid\\": $uid, \\"userns\\": $userns, \\"max_userns\\": \\"$max\\", \\"fuse\\": $fuse, \\
\\"enroot_paths\\": {{$paths}}}}"
"""

USERNS_FIX = (
    "the site allows unprivileged user namespaces (sysctl user.max_user_namespaces > 0; on Ubuntu "
    "also kernel.apparmor_restrict_unprivileged_userns=0)"
)
FUSE_FIX = "the site makes /dev/fuse mode 0666 on the compute nodes (Debian's default)"


def parse_needs(stdout: str) -> dict | None:
    line = next((ln for ln in stdout.splitlines() if ln.startswith(NEEDS_PREFIX)), None)
    return None if line is None else json.loads(line[len(NEEDS_PREFIX) :])


def userns_check(node: dict, who: str) -> Check:
    """``who`` needs a user namespace to start a container (a non-root user's enroot, say)."""
    if node["userns"]:
        return Check("user namespaces", "ok", f"uid {node['uid']} may create one (max {node['max_userns']})")
    return Check(
        "user namespaces",
        "fail",
        f"uid {node['uid']} cannot create a user namespace (user.max_user_namespaces = {node['max_userns']}): "
        f"{who} cannot start a container",
        USERNS_FIX,
    )


def fuse_check(node: dict, without: str) -> Check:
    """An image mount by the user in a user namespace; ``without``: what the runtime does instead.
    (``fusermount3`` is not needed there: measured on the lab, Apptainer 1.4 without it.)"""
    if node["fuse"]:
        return Check("fuse", "ok", f"uid {node['uid']} may open /dev/fuse (images mount with squashfuse)")
    return Check("fuse", "warn", f"/dev/fuse is not open to uid {node['uid']}: {without}", FUSE_FIX)


def enroot_path_checks(node: dict) -> list[Check]:
    out = []
    for var, (path, ok) in sorted(node.get("enroot_paths", {}).items()):
        if ok:
            continue
        out.append(
            Check(
                "enroot paths",
                "fail",
                f"{var} is {path or '(unset)'}, which uid {node['uid']} cannot create or write",
                f"the site sets {var} to a per-user path on node-local disk in enroot.conf "
                f"(e.g. /run/enroot/user-$(id -u), or a sticky 1777 parent with user-$(id -u) below it)",
            )
        )
    if not out and node.get("enroot_paths"):
        out.append(Check("enroot paths", "ok", f"runtime, cache and data paths writable by uid {node['uid']}"))
    return out
