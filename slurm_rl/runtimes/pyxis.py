"""Pyxis + enroot (a SPANK plugin: srun's --container-* flags): each node's step is one unnamed
container (pyxis removes it when the step ends however it ends), started from the node's
prepared copy of a squashfs image under a per-container layer (the image cache,
pyxis_image_cache.sh) or unpacked per job. Attach joins the running container (``enroot exec``
of the node's bootstrap); nothing of the job starts the image again."""

from __future__ import annotations

import os
import shutil
import sys
from typing import TYPE_CHECKING

from ..core.checks import Check
from ..core.errors import UsageError
from ..core.paths import image_cache_dir
from ..slurm.site import SpankPlugin, site_config, spank_plugins
from .base import HERE, Runtime
from .unprivileged import NEEDS_SHELL, enroot_path_checks, parse_needs, userns_check

if TYPE_CHECKING:
    from ..config.spec import ClusterSpec
    from ..core.manifest import Container
    from ..core.paths import JobPaths
    from ..slurm import SlurmClient

CACHE_SHELL = HERE / "pyxis_image_cache.sh"
OVERLAY_HOOK_SHELL = HERE / "pyxis_overlay_hook.sh"
OVERLAY_HOOK = "hooks.d/90-slurm-rl-overlay.sh"
# what pyxis names a step's container: pyxis_<job>.<step> (scope global) or pyxis_<job>_<job>.<step>
JOB_CONTAINERS = 'enroot list 2>/dev/null | grep -E "^pyxis_${%s}[._]"'


def pyxis_plugin(config: dict[str, str]) -> SpankPlugin | None:
    """The site's Pyxis among its SPANK plugins, as this login node's plugstack.conf says."""
    return next((p for p in spank_plugins(config) if "pyxis" in p.path), None)


def pyxis_scope(config: dict[str, str]) -> str | None:
    """The ``container_scope`` of the site's Pyxis (pyxis' default: global); None where this
    machine shows no Pyxis."""
    pyxis = pyxis_plugin(config)
    return pyxis.args.get("container_scope", "global") if pyxis else None


class Pyxis(Runtime):
    name = "pyxis"
    title = "Pyxis"
    has_image_cache = True
    step_wide_flags = True

    def cache_mb(self, spec: ClusterSpec, image: str) -> int:
        # pyxis reads an image that starts with "." or "/" as a squashfs file (else: a registry)
        return int(spec.image_cache_gb * 1024) if spec.image_cache and image[:1] in (".", "/") else 0

    def launch(self, container: Container, workdir: str) -> tuple[list[str], list[str]]:
        """An unnamed container, so pyxis removes it when the step ends however it ends (a named
        one outlives the job under pyxis' default container_scope=global), unless the image is
        cached (``shell_flags`` adds --container-name: the prepared copy). Writable: the root
        filesystem is the job's own (its unpack, or its layer over the cache)."""
        return (
            [
                f"--container-image={container.image}",
                f"--container-mounts={','.join(container.mounts)}",
                "--no-container-mount-home",
                f"--container-workdir={workdir}",
                "--container-writable",
            ],
            [],
        )

    def shell_flags(self, container: Container) -> list[str]:
        return ['"${slurm_rl_image_flags[@]}"'] if container.cached else []

    def prepare_template(self, container: Container) -> str:
        return "runtimes/pyxis_prepare.sh.j2" if container.cached else ""

    def stage(self, container: Container, paths: JobPaths) -> None:
        """What the image cache's steps run from the job dir: the per-node script, and an enroot
        config dir (ENROOT_CONFIG_PATH of the container step) with the user's own enroot config,
        if any, and slurm-rl's overlay hook."""
        if not container.cached:
            return
        paths.image_cache_script.parent.mkdir(exist_ok=True)
        shutil.copyfile(CACHE_SHELL, paths.image_cache_script)
        xdg = os.environ.get("XDG_CONFIG_HOME") or os.path.expanduser("~/.config")
        own = os.environ.get("ENROOT_CONFIG_PATH") or f"{xdg}/enroot"
        if os.path.isdir(own):
            shutil.copytree(own, paths.enroot_config, symlinks=True)
        hook = paths.enroot_config / OVERLAY_HOOK
        hook.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(OVERLAY_HOOK_SHELL, hook)
        hook.chmod(0o755)

    def requeue_cleanup(self) -> str:
        each = JOB_CONTAINERS % "SLURM_JOB_ID"
        return f"bash -c 'for c in $({each}); do enroot remove -f \"$c\" >/dev/null 2>&1; done; true'"

    def leftovers_shell(self) -> str:
        return (
            "command -v enroot >/dev/null 2>&1 || exit 0\n"
            f"for c in $({JOB_CONTAINERS % 'job'}); do\n"
            '  enroot remove -f "$c" >/dev/null 2>&1 && echo "$c"\n'
            "done\n"
        )

    def attach(
        self,
        container: Container,
        workdir: str,
        temp_dir: str,
        command: list[str],
        variables: list[str],
        pid: int | None,
    ) -> list[str]:
        """Into the running container (``enroot exec`` of the node's bootstrap: its mounts and
        environment, plus ``variables`` from ours)."""
        if pid is None:
            raise UsageError("no node_start event from that node yet; try again in a moment")
        return ["enroot", "exec", *(a for v in variables for a in ("--env", v)), str(pid), *command]

    def site_check(self, spec: ClusterSpec, config: dict[str, str]) -> Check:
        pyxis = pyxis_plugin(config)
        if pyxis is None:
            return Check(
                "pyxis", "fail", "no Pyxis in plugstack.conf, the spec wants it",
                "set container_runtime to 'none' or ask for Pyxis",
            )  # fmt: skip
        scope = pyxis_scope(config)
        text = f"{pyxis.path}, container_scope={scope}"
        if pyxis.args.get("use_squashfuse", "0").lower() in ("1", "true", "yes", "y"):
            text += ", use_squashfuse=1"
        if spec.image_cache and scope == "job":
            return Check("pyxis", "warn", text, 'image cache off under container_scope=job: set "image_cache": false')
        return Check("pyxis", "ok", text + (", image cache on" if spec.image_cache else ""))

    needs_shell = NEEDS_SHELL

    def needs_checks(self, stdout: str) -> list[Check]:
        """enroot, as a user who is not root, starts every container in a user namespace and
        writes its runtime, cache and data paths as that user."""
        node = parse_needs(stdout)
        if node is None:
            return [Check("user namespaces", "fail", "the bare-node check did not say (see the probe's output)")]
        if node["uid"] == 0:
            return []
        return [userns_check(node, "enroot (Pyxis)"), *enroot_path_checks(node)]

    def probe(self, spec: ClusterSpec, python_argv: list[str]) -> tuple[list[str], list[str]]:
        image = spec.cpu_image or spec.gpu_image
        return [f"--container-image={image}", f"--container-mounts={spec.fileroot}:{spec.fileroot}"], python_argv

    def preflight(self, spec: ClusterSpec, client: SlurmClient) -> ClusterSpec:
        """The image cache off where the site's Pyxis has container_scope=job: pyxis then names
        every container after its job, so no job can start from a node's prepared copy (and the
        job's epilog would remove it)."""
        if not spec.image_cache or pyxis_scope(site_config(client)) != "job":
            return spec
        print(
            "slurm-rl: pyxis here has container_scope=job (named containers end with their job): the image "
            'cache is off, every job unpacks its image; set "image_cache": false in the spec to silence this',
            file=sys.stderr,
        )
        return spec.model_copy(update={"image_cache": False})

    def image_cache_argv(self, spec: ClusterSpec, action: str, keys: tuple[str, ...]) -> list[str]:
        meta = image_cache_dir(spec.node_local_dir)
        return ["bash", "-c", CACHE_SHELL.read_text(), "image-cache", action, meta, *keys]
