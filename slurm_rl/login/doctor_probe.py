"""`slurm-rl doctor --probe`: one tiny job (an srun of one task on one node of the spec's
partition, two minutes at most) runs ``slurm_rl.job.probe`` with the spec's interpreter and
reports what the login node cannot know: the fileroot written there and seen here, the node's
interfaces against ``network_interface``, room for Ray's ports, and its Python and Ray against
the login side's."""

from __future__ import annotations

import json
import os
import platform
import sys
import uuid
from pathlib import Path

from ..config.spec import ClusterSpec
from ..core.checks import Check
from ..core.errors import UsageError
from ..core.paths import current_user
from ..runtimes import runtime_of
from ..runtimes.base import Runtime
from ..slurm import SlurmClient
from ..slurm.node_steps import one_task_step
from .submission.user_dir import own_user_dir

PROBE_PREFIX = "SLURM_RL_PROBE "  # slurm_rl.job.probe's line
NOT_PROBED = ("fileroot", "network", "ports", "python and ray")


def not_probed(
    spec: ClusterSpec, why: str = "not checked (`doctor --probe` submits one tiny job to check it)"
) -> list[Check]:
    names = (*NOT_PROBED, *runtime_of(spec.container_runtime).probed)
    return [Check(name, "skip", why) for name in names]


def probe_checks(spec: ClusterSpec, client: SlurmClient, timeout_s: float = 180.0) -> list[Check]:
    python = spec.python or sys.executable
    # in the user's own <fileroot>/<user> (0700): a shared <fileroot>/.doctor is whoever made it
    # first's, and another user's probe could not write there (found on the lab: root's, 0755)
    try:
        marker_dir = own_user_dir(spec.fileroot, current_user()) / ".doctor"
        marker_dir.mkdir(exist_ok=True)  # (own_user_dir says its own OSErrors: this one is the mkdir's)
    except UsageError as exc:
        return [Check("fileroot", "fail", str(exc).removeprefix("fileroot: "), "remove it, or set another fileroot")]
    except OSError as exc:
        return [
            Check(
                "fileroot",
                "fail",
                f"cannot create {marker_dir} here ({exc.strerror})",
                "set fileroot to a writable shared path",
            )
        ]
    marker = marker_dir / uuid.uuid4().hex[:12]
    site = [
        f"--{k.replace('_', '-')}={v}"
        for k in ("partition", "account", "qos", "reservation")
        if (v := getattr(spec, k))
    ]
    # in the job's container: the image's python, Ray and slurm-rl, as a job's
    runtime = runtime_of(spec.container_runtime)
    flags, probe = runtime.probe(
        spec,
        [
            python,
            "-m",
            "slurm_rl.job.probe",
            "--marker",
            str(marker),
            "--network-interface",
            spec.network_interface or "",
        ],
    )
    srun = one_task_step("slurm-rl-doctor", minutes=2, flags=site)
    try:
        needs = runtime_needs(runtime, client, srun, timeout_s)
        if any(c.status == "fail" for c in needs):  # the container cannot start as this user: say why
            return [*needs, *not_probed(spec, "not checked: the container cannot start (above)")]
        res = client.run([*srun, *flags, *probe], timeout_s=timeout_s, check=False)
        line = next((ln for ln in res.stdout.splitlines() if ln.startswith(PROBE_PREFIX)), None)
        mine = [*needs, *runtime.probe_checks(res.stdout)]
        if line is None and any(c.status == "fail" for c in mine):  # the runtime said why
            return [*mine, *not_probed(spec, "not checked: the container did not start")[: len(NOT_PROBED)]]
        if line is None:
            why = (res.stderr.strip().splitlines() or [f"exit {res.returncode}, no answer"])[-1]
            return [
                Check(
                    "probe job",
                    "fail",
                    f"the probe did not run: {why}",
                    f"check the spec's partition/account and that {python} exists on the nodes",
                ),
                *not_probed(spec)[1 : len(NOT_PROBED)],
                *mine,
            ]
        return [*judge(spec, json.loads(line[len(PROBE_PREFIX) :]), marker), *mine]
    finally:
        marker.unlink(missing_ok=True)


def runtime_needs(runtime: Runtime, client: SlurmClient, srun: list[str], timeout_s: float) -> list[Check]:
    """What the runtime needs of the bare node for this user (``needs_shell``), checked by one
    srun before the container probe; [] for a runtime that needs nothing, or as root (the same
    uid on the nodes: no srun spent)."""
    if not runtime.needs_shell or os.geteuid() == 0:
        return []
    res = client.run([*srun, "bash", "-c", runtime.needs_shell], timeout_s=timeout_s, check=False)
    return runtime.needs_checks(res.stdout)


def judge(spec: ClusterSpec, node: dict, marker: Path) -> list[Check]:
    host = node["host"]
    out = [Check("probe job", "ok", f"ran on {host} (one srun, then gone)")]
    if "No such file" in node["fileroot_error"]:  # the dir made here for it is not there
        out.append(
            Check(
                "fileroot",
                "fail",
                f"{host} does not see {marker.parent}, made here: {spec.fileroot} is not shared with the nodes",
                "set fileroot to a filesystem shared by login and compute nodes",
            )
        )
    elif node["fileroot_error"]:
        out.append(
            Check(
                "fileroot",
                "fail",
                f"{host} cannot write it ({node['fileroot_error']})",
                "set fileroot to a path every node can write",
            )
        )
    elif not marker.is_file() or marker.read_text() != host:
        out.append(
            Check(
                "fileroot",
                "fail",
                f"{host} wrote {marker}, this login node does not see it",
                "set fileroot to a filesystem shared by login and compute nodes",
            )
        )
    else:
        out.append(Check("fileroot", "ok", f"{spec.fileroot}: written on {host}, seen here"))
    if node["network_error"]:
        out.append(Check("network", "fail", node["network_error"]))
    else:
        out.append(
            Check("network", "ok", f"Ray on {host} would use {node['address']}; interfaces: {node['interfaces']}")
        )
    if node["ports_ok"]:
        out.append(Check("ports", "ok", f"a free block of Ray ports below the ephemeral range ({node['ephemeral']})"))
    else:
        out.append(
            Check(
                "ports",
                "warn",
                f"no free block below the ephemeral range ({node['ephemeral']}): Ray's ports are left to the OS",
            )
        )
    mine = (platform.python_version().rsplit(".", 1)[0], _ray_version())
    theirs = (node["python"].rsplit(".", 1)[0], node.get("ray"))
    if node.get("ray") is None:
        out.append(
            Check(
                "python and ray",
                "fail",
                f"{host}'s python {node['python']} cannot import ray ({node.get('ray_error')})",
                "install ray where the spec's python is",
            )
        )
    elif mine != theirs:
        out.append(
            Check(
                "python and ray",
                "fail",
                f"{host}: Python {theirs[0]}, Ray {theirs[1]}; here: Python {mine[0]}, Ray {mine[1]}",
                "a Ray cluster refuses a driver of another Python minor or Ray: "
                "use the same venv (the spec's python) on both",
            )
        )
    else:
        out.append(Check("python and ray", "ok", f"Python {theirs[0]}, Ray {theirs[1]} on {host}, as here"))
    return out


def _ray_version() -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("ray")
    except PackageNotFoundError:
        return None
