"""Apptainer: each node's step runs under ``apptainer exec`` of the image, which Apptainer mounts
as it is (a SIF, or the squashfs file Pyxis also takes) where it can, so there is no image cache
to keep (an unprivileged user without /dev/fuse: extracted once per node and job, below).
``exec``, not an instance: the container is the step's own processes and ends with them however
the step ends (an instance is a daemon that outlives its step unless stopped). Attach starts one
more ``exec`` of the same image with the same binds on the node: the job's Ray temp dir,
fileroot and network are the node's, so it sees the job as its driver does."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from ..core.checks import Check
from ..core.manifest import JOB_ID_PLACEHOLDER
from ..core.paths import node_temp_dir
from .base import PROBE_RUNTIME_PREFIX, Runtime
from .unprivileged import NEEDS_SHELL, fuse_check, parse_needs

if TYPE_CHECKING:
    from ..config.spec import ClusterSpec
    from ..core.manifest import Container

MIN_VERSION = (1, 1)  # user namespaces by default, --no-mount
# How the image is opened is decided on the node, as its user: root and a setuid starter mount it
# with the kernel, a user in a user namespace with squashfuse, which needs /dev/fuse open to them
# (3.1 s to a python prompt on the lab, root 1.5 s). Without it Apptainer fails ("fuse: failed to
# open /dev/fuse"), so slurm-rl extracts the image once per node and job (`apptainer build
# --sandbox`: 2.5 s, 4 CPU-s on the lab) into the job's node-local dir, which every end path of
# the job removes, and every start of the job on that node (the step, attach, a member) runs the
# extracted tree (0.2 s): Apptainer's own APPTAINER_UNSQUASH extracted it again at each start
# (4.3 s, 6 CPU-s) and an attach cost as much. Two starts at once each extract, one tree stays
# (a rename); where the extraction fails (a full disk) the start extracts as Apptainer does.
# A signal mid-extraction (a time limit or a cancel while a loaded node still extracts: no
# bootstrap runs yet to clean up) removes the half-made tree, and the node dir if it made it.
# $1: --node-temp=DIR, the job's node-local dir; $2: --image=IMAGE; then apptainer's argv.
HAS_SETUID_STARTER = '[ -u "$(apptainer buildcfg LIBEXECDIR 2>/dev/null)/apptainer/bin/starter-suid" ]'
OPEN_IMAGE_SHELL = f"""t=${{1#--node-temp=}} img=${{2#--image=}}; shift 2
if [ "$(id -u)" != 0 ] && ! [ -r /dev/fuse -a -w /dev/fuse ] && ! {HAS_SETUID_STARTER}; then
  export APPTAINER_TMPDIR=$t
  fresh=; [ -d "$t" ] || fresh=1
  (umask 077; mkdir -p "$APPTAINER_TMPDIR")
  tree=$t/image
  if [ ! -d "$tree" ] && new=$(mktemp -d "$t/image.XXXXXX"); then
    apptainer -q build --sandbox --force "$new/tree" "$img" >&2 &
    b=$!
    gone() {{ kill "$b" 2>/dev/null; wait "$b"; rm -rf "$new"; [ -z "$fresh" ] || rm -rf "$t"; exit "$1"; }}
    trap 'gone 143' TERM; trap 'gone 130' INT; trap 'gone 129' HUP
    wait "$b" && mv -T "$new/tree" "$tree" 2>/dev/null
    trap - TERM INT HUP
    rm -rf "$new"
  fi
  if [ -d "$tree" ]; then
    first=1 swapped=
    for a in "$@"; do  # the list is read once: the image's argument becomes the tree
      if [ -n "$first" ]; then set --; first=; fi
      if [ -z "$swapped" ] && [ "$a" = "$img" ]; then a=$tree swapped=1; fi
      set -- "$@" "$a"
    done
  else
    export APPTAINER_UNSQUASH=1
  fi
fi
exec "$@"
"""


# The node's apptainer, said on one line before the probe runs inside the image (plain shell:
# the bare node may have no python). $1: the image, $2: the fileroot, $3: the node-local root,
# then the probe's argv, which runs in the image opened as a job's is: in a subshell, so that the
# node dir an unprivileged start extracts the image into (keyed by the probe's job id) is removed
# after it (no job cleanup ever runs for the probe's job).
PROBE_SHELL = f"""set -u
image=$1 fileroot=$2 scratch=$3; shift 3
say() {{ echo "{PROBE_RUNTIME_PREFIX}$1"; }}
command -v apptainer >/dev/null 2>&1 || {{ say '{{"found": false}}'; exit 0; }}
version=$(apptainer --version 2>/dev/null | awk '{{print $NF}}')
userns=false; unshare --user --map-root-user true 2>/dev/null && userns=true
setuid=false; {HAS_SETUID_STARTER} && setuid=true
root=false; [ "$(id -u)" = 0 ] && root=true
say "{{\\"found\\": true, \\"version\\": \\"$version\\", \\"userns\\": $userns, \\"setuid\\": $setuid, \\
\\"root\\": $root}}"
{NEEDS_SHELL}
set +u
probe_temp={node_temp_dir("${SLURM_JOB_ID:-probe$$}", "$scratch")}
(set -- "--node-temp=$probe_temp" "--image=$image" \\
  apptainer exec --no-mount home,cwd --bind "$fileroot:$fileroot" "$image" "$@"
{OPEN_IMAGE_SHELL}); rc=$?
rm -rf "$probe_temp"; exit $rc"""


def exec_prefix(container: Container, workdir: str, temp_dir: str) -> list[str]:
    """``apptainer exec`` of the job's image with its mounts (the spec's, the fileroot, the
    node-local dir), in ``workdir``; the environment passes as it is (SLURM's, the job's).
    Through OPEN_IMAGE_SHELL, which sets how the node opens the image (``temp_dir``: the job's
    node-local dir, where an extracted image goes and every end path of the job removes)."""
    prefix = ["apptainer", "exec", "--no-mount", "home,cwd,tmp", f"--pwd={workdir}"]
    for mount in container.mounts:
        prefix += ["--bind", mount]
    if container.gpus:
        prefix.append("--nv")
    return [
        "sh",
        "-c",
        OPEN_IMAGE_SHELL,
        "slurm-rl-apptainer",
        f"--node-temp={temp_dir}",
        f"--image={container.image}",
        *prefix,
        str(container.image),
    ]


def version_tuple(text: str) -> tuple[int, ...]:
    out = []
    for part in text.split("-")[0].split(".")[:3]:
        if not part.isdigit():
            break
        out.append(int(part))
    return tuple(out)


class Apptainer(Runtime):
    name = "apptainer"
    title = "Apptainer"

    def launch(self, container: Container, workdir: str) -> tuple[list[str], list[str]]:
        # the node dir as render keys it (a sweep's task, a member job: the job it joins)
        return [], exec_prefix(container, workdir, container.temp_dir(JOB_ID_PLACEHOLDER))

    def attach(
        self,
        container: Container,
        workdir: str,
        temp_dir: str,
        command: list[str],
        variables: list[str],
        pid: int | None,
    ) -> list[str]:
        return [*exec_prefix(container, workdir, temp_dir), *command]

    def site_check(self, spec: ClusterSpec, config: dict[str, str]) -> Check | None:
        return None  # it runs on the nodes, not through SLURM: the probe checks it there

    probed = ("apptainer", "fuse")

    def probe(self, spec: ClusterSpec, python_argv: list[str]) -> tuple[list[str], list[str]]:
        image = spec.cpu_image or spec.gpu_image or ""
        return [], ["bash", "-c", PROBE_SHELL, "probe", image, spec.fileroot, spec.node_local_dir, *python_argv]

    def probe_checks(self, stdout: str) -> list[Check]:
        line = next((ln for ln in stdout.splitlines() if ln.startswith(PROBE_RUNTIME_PREFIX)), None)
        if line is None:
            return [Check("apptainer", "fail", "the probe job did not say (see the probe's line)")]
        node = json.loads(line[len(PROBE_RUNTIME_PREFIX) :])
        needs = parse_needs(stdout)
        if needs is None or node.get("root") or node.get("setuid") or not node.get("found"):
            return [judge(node)]  # root, or the setuid starter: the kernel mounts the image
        without = "each job extracts the image once per node instead (about 3 s more per node: docs/sites.md)"
        return [judge(node), fuse_check(needs, without)]


def judge(node: dict) -> Check:
    """The node's apptainer against what a job needs: present, new enough, and able to start a
    container as the job's user (user namespaces, or a setuid starter, or root)."""
    if not node.get("found"):
        return Check(
            "apptainer", "fail", "no apptainer on the node's PATH",
            'install Apptainer >= 1.1 on the compute nodes (or `module load apptainer` in the spec\'s "setup")',
        )  # fmt: skip
    version = str(node.get("version") or "?")
    if version_tuple(version) < MIN_VERSION:
        return Check(
            "apptainer", "fail", f"apptainer {version} is older than {'.'.join(map(str, MIN_VERSION))}",
            "ask for Apptainer >= 1.1 (SingularityCE/older Apptainer lack the flags slurm-rl uses)",
        )  # fmt: skip
    if node.get("root"):
        how = "as root"
    elif node.get("userns"):
        how = "unprivileged, in a user namespace"
    elif node.get("setuid"):
        how = "through its setuid starter"
    else:
        return Check(
            "apptainer", "fail", f"apptainer {version}: no user namespaces for this user, and no setuid starter",
            "ask the admins for user namespaces (sysctl user.max_user_namespaces > 0; on Ubuntu "
            "kernel.apparmor_restrict_unprivileged_userns=0) or Apptainer's setuid install",
        )  # fmt: skip
    return Check("apptainer", "ok", f"apptainer {version} on the node, starts containers {how}")
