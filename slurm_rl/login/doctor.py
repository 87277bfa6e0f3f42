"""`slurm-rl doctor`: what this site's SLURM is, against what a spec asks of it, one line per
check. Without ``--probe`` nothing is submitted (the checks that need a compute node are listed
as not checked); ``--probe`` adds them (doctor_probe.py).

Each check is a ``Check``: ok, warn (works, with a caveat worth knowing), fail (a job would fail
or pend forever), or skip (not checked), with what was found and the fix."""

from __future__ import annotations

from collections.abc import Callable

from ..config.spec import ClusterSpec
from ..core.checks import Check, Status
from ..runtimes import runtime_of
from ..slurm import SlurmClient, supported_text
from ..slurm.site import associations, site_config


def site_checks(spec: ClusterSpec, client: SlurmClient, user: str) -> list[Check]:
    """Every check that the login node answers (SLURM's commands and config), cheapest first."""
    out: list[Check] = []
    version = _guard(out, "slurm", lambda: check_version(client))
    if version is None or version.status == "fail":
        return out
    config = site_config(client)
    for check in (
        lambda: check_partition(spec, client),
        lambda: check_associations(spec, client, user),
        lambda: check_tracking(config),
        lambda: check_topology(config, spec, client),
        lambda: check_gpus(spec, client),
        lambda: runtime_of(spec.container_runtime).site_check(spec, config),
    ):
        _guard(out, "", check)
    return out


def _guard(out: list[Check], name: str, make: Callable[[], Check | list[Check] | None]) -> Check | None:
    """Run one check; a SLURM command that fails is that check's ✗, not doctor's crash."""
    try:
        got = make()
    except Exception as exc:  # noqa: BLE001 - each check reports its own failure
        got = Check(name or "check", "fail", f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
    found = got if isinstance(got, list) else [got] if got is not None else []
    out.extend(found)
    return found[0] if found else None


def check_version(client: SlurmClient) -> Check:
    from ..core.errors import UsageError

    try:
        v = client.version()
    except UsageError as exc:
        return Check("slurm", "fail", str(exc).split(";")[0], "use a login node with a supported SLURM")
    return Check("slurm", "ok", f"SLURM {v}; slurm-rl supports {supported_text()}")


def check_partition(spec: ClusterSpec, client: SlurmClient) -> list[Check]:
    out = []
    table = client.partitions()
    for field, name in (("partition", spec.partition), ("head_partition", spec.head_partition)):
        if name is None and field == "head_partition":
            continue
        found = client.partition(name)
        if found is None:
            known = ", ".join(sorted(table)) or "none"
            what = f"{name!r} does not exist" if name else "SLURM has no default partition"
            out.append(
                Check(field, "fail", f"{what} (partitions: {known})", f"set the spec's {field!r} to one of them")
            )
            continue
        limit = found.max_time or "no time limit"
        out.append(
            Check(
                field,
                "ok",
                f"{found.name}: {found.nodes} nodes, up to {found.cpus} CPUs, {found.gpus} GPUs per node, {limit}",
            )
        )
    return out


def check_associations(spec: ClusterSpec, client: SlurmClient, user: str) -> list[Check]:
    assocs = associations(client, user)
    if assocs is None:
        return [
            Check(
                "accounting", "warn", "no accounting here (sacctmgr does not answer): accounts and QOS are not checked"
            )
        ]
    if not assocs:
        return [
            Check(
                "account", "fail", f"user {user} has no association on this cluster", "ask your admins for an account"
            )
        ]
    accounts = sorted({a.account for a in assocs})
    wanted = spec.account or None
    mine = [a for a in assocs if wanted is None or a.account == wanted]
    out = []
    if wanted and not mine:
        out.append(
            Check(
                "account",
                "fail",
                f"{wanted!r} is not one of {user}'s accounts ({', '.join(accounts)})",
                "set the spec's 'account' to one of them",
            )
        )
        return out
    out.append(Check("account", "ok", f"{wanted or 'default'}: {user} may use {', '.join(accounts)}"))
    allowed = sorted({q for a in mine for q in a.qos})
    if spec.qos and spec.qos not in allowed:
        out.append(
            Check(
                "qos",
                "fail",
                f"{spec.qos!r} is not allowed for {user} ({', '.join(allowed)})",
                "set the spec's 'qos' to one of them",
            )
        )
        return out
    qos = spec.qos or (mine[0].default_qos if mine else "")
    limits = client.qos_limits(qos) if qos else None
    detail = ""
    if limits is not None:
        parts = [
            f"MaxWall {limits.max_wall}" if limits.max_wall else "",
            *(f"{k}<={v} per job" for k, v in limits.per_job.items()),
        ]
        detail = f" ({', '.join(p for p in parts if p) or 'no per-job limits'})"
    gpus = limits.per_node.get("gres/gpu") if limits else None
    if gpus is not None and spec.gpus_per_node > gpus:
        out.append(
            Check(
                "qos",
                "fail",
                f"{qos} allows {gpus} GPUs per node, the spec asks {spec.gpus_per_node}",
                "lower gpus_per_node or choose another qos",
            )
        )
    else:
        out.append(Check("qos", "ok", f"{qos or 'none'}{detail}"))
    return out


def check_tracking(config: dict[str, str]) -> list[Check]:
    track, task = config.get("ProctrackType", "?"), config.get("TaskPlugin", "?")
    cgroup = config.get("CgroupPlugin", "")
    if track == "proctrack/cgroup":
        line = Check(
            "process tracking", "ok", f"{track}, {task}: SLURM itself ends every process of a job, daemonized Ray too"
        )
    else:
        # SLURM alone would leave daemonized Ray behind; slurm-rl's own stop covers it (proven on the lab)
        line = Check(
            "process tracking",
            "ok",
            f"{track}, {task}: SLURM loses processes that leave the step (daemonized Ray); slurm-rl stops them "
            "itself, and `slurm-rl teardown JOB` cleans up after a lost job",
        )
    memory = (
        "memory limits are enforced per job"
        if "task/cgroup" in task
        else "no per-job memory limit (task/cgroup is off)"
    )
    return [line, Check("cgroup", "ok", f"{cgroup or 'no cgroup plugin reported'}; {memory}")]


def check_topology(config: dict[str, str], spec: ClusterSpec, client: SlurmClient) -> Check:
    plugin = config.get("TopologyPlugin", "?")
    if plugin.endswith("block"):
        return Check("topology", "ok", f"{plugin}: --segment N places nodes in whole blocks (NVLink domains)")
    why = "23.11 and later" if not client.version().segments else "TopologyPlugin=topology/block"
    status: Status = "fail" if spec.segment else "ok"
    fix = "drop the spec's 'segment'" if spec.segment else ""
    return Check("topology", status, f"{plugin}: Ray nodes know their switch; --segment needs {why}", fix)


def check_gpus(spec: ClusterSpec, client: SlurmClient) -> Check:
    parts = [p for p in client.partitions().values() if p.gres]
    if not parts:
        status: Status = "fail" if spec.gpus_per_node else "ok"
        return Check(
            "gpus",
            status,
            "no GPU GRES in any partition",
            "drop gpus_per_node from the spec" if spec.gpus_per_node else "",
        )
    text = "; ".join(
        f"{p.name}: {','.join(p.gres)} on {p.nodes} nodes ({'typed' if p.gpus_typed else 'untyped'})" for p in parts
    )
    typed = any(p.gpus_typed for p in parts)
    if typed and not spec.gpu_type and len({g.split(":")[1] for p in parts for g in p.gres if g.count(":") >= 2}) > 1:
        return Check("gpus", "warn", text, "several GPU types: set the spec's 'gpu_type' to choose")
    return Check("gpus", "ok", text)
