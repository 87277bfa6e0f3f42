"""`slurm-rl teardown JOBID`: cancel a job if it still runs, then make sure nothing of it is left
on any of its nodes, and report per node what was stopped.

Safe by construction: it only acts on a job whose job dir is under the caller's fileroot
(never someone else's), and on each node it stops only processes positively marked as the job's
(see procs.py). Idempotent: a second run finds nothing and says so.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..config.spec import ClusterSpec
from ..core.causes import CANCELLED, Cause
from ..core.errors import JobError, UnknownJobError, UsageError
from ..core.events import append_event, read_events, read_json
from ..core.exits import STOPPED_RC, record_exit
from ..core.job_dir import cleaned_nodes
from ..core.manifest import load_manifest
from ..core.members import lost_to_healing, member_jobs
from ..core.nodelist import expand_hostlist
from ..core.paths import JobPaths
from ..runtimes import runtime_of
from ..slurm import SlurmClient
from ..slurm.client import step_flags
from ..slurm.records import JobState
from .reading.lookup import find_job_dir


@dataclass
class TeardownReport:
    job_id: int | str
    cancelled: bool
    state_before: str
    nodes: list[str]
    per_node: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def killed_total(self) -> int:
        return sum(len(n.get("killed", [])) for n in self.per_node)

    def as_dict(self) -> dict[str, Any]:
        return {
            "job_id": self.job_id,
            "cancelled": self.cancelled,
            "state_before": self.state_before,
            "nodes": self.nodes,
            "per_node": self.per_node,
            "killed_total": self.killed_total,
            "seconds": round(self.seconds, 3),
        }


def job_nodes(paths: JobPaths, slurm_nodelist: str) -> list[str]:
    """The job's nodes: cluster.json, else SLURM's node list, else the nodes that logged events."""
    cluster = read_json(paths.cluster) or {}
    if cluster.get("nodes"):
        return list(cluster["nodes"])
    if slurm_nodelist and slurm_nodelist not in ("(null)", "None"):
        return expand_hostlist(slurm_nodelist)
    return sorted({e["node"] for e in read_events(paths.events) if e.get("event") == "node_start" and e.get("node")})


def teardown(
    spec: ClusterSpec,
    user: str,
    job_id: int | str,
    client: SlurmClient,
    grace_s: float = 1.0,
    gone_timeout_s: float = 30.0,
    force: bool = False,
) -> TeardownReport:
    t0 = time.monotonic()
    try:
        paths = find_job_dir(job_id, user, client, spec)
    except UnknownJobError:
        owner = client.job_owner(job_id)
        if owner and owner != user:
            raise UsageError(
                f"job {job_id} belongs to {owner!r}, not {user!r}; teardown only touches your own jobs"
            ) from None
        if owner:
            raise UsageError(
                f"job {job_id} is yours but was not submitted by slurm-rl (no slurm-rl job dir "
                f"found for it); use scancel {job_id}"
            ) from None
        raise UsageError(
            f"job {job_id}: unknown to SLURM and no slurm-rl job dir found for it; check the id with `slurm-rl list`"
        ) from None
    try:
        manifest = load_manifest(paths.manifest)
        submitter, bare = manifest.user, not runtime_of(manifest.container.runtime).contained
    except JobError:
        submitter, bare = user, False  # a job dir from before manifests: found under your own fileroot
    if submitter != user:
        raise UsageError(
            f"job {job_id} was submitted by {submitter!r}, not {user!r}; teardown only touches your own jobs"
        )
    state = client.job_state(job_id)
    events = read_events(paths.events)
    lost = lost_to_healing(events)  # nothing survived on them, and SLURM took them out of the job
    nodes = [n for n in job_nodes(paths, state.nodelist) if n not in lost]
    started = any(e.get("event") == "node_start" for e in events)
    targets = [Target(job_id, nodes, state), *member_targets(events, client)]
    if state.state == "RUNNING" and nodes and started:  # the bootstraps' own SIGTERM report comes later
        record_exit(paths, STOPPED_RC, f"cancelled by slurm-rl teardown (was {state.state})", Cause(CANCELLED))
    inside = stop_inside(paths, job_id, client, targets, 0.0 if force else grace_s) if started else []
    cancelled = cancel_all(paths, client, targets, gone_timeout_s)
    report = TeardownReport(job_id, job_id in cancelled, state.state, nodes, per_node=inside)
    report.nodes += sorted({n for t in targets[1:] for n in t.nodes} - set(nodes))
    # nodes whose bootstrap cleaned up at the job's end (a scancel's SIGTERM, an ended job's own
    # end): nothing is left there to look for, and a node full of other jobs would not take a step.
    # (A container job's nodes are looked at all the same: pyxis removes its container after the
    # bootstrap's cleanup, and a SIGKILL can cut that short.)
    answered = {n.get("node") for n in inside}
    clean = sorted(cleaned_nodes(read_events(paths.events)) & set(nodes) - answered) if bare else []
    report.per_node = merge_reports(report.per_node, [{"node": n, "cleaned_at_end": True} for n in clean])
    rest = sorted(set(report.nodes) - answered - set(clean))
    # the job had ended (a lost job's leftovers), a node did not answer inside it, or its nodes ran
    # it without a bootstrap yet (a container runtime still starting: Apptainer extracting its image)
    if rest and (started or state.state == "RUNNING"):
        argv = cleanup_command(paths, job_id, grace_s)
        res = client.run_on_nodes(None, rest, argv, srun_flags=site_flags(paths))
        report.per_node = merge_reports(report.per_node, parse_reports(res.stdout))
        missing = set(rest) - {n.get("node") for n in report.per_node}
        if missing:
            raise JobError(
                f"job {job_id}: cleanup did not report from {', '.join(sorted(missing))} "
                f"(srun exited {res.returncode}: {res.stderr.strip()[-300:]}); run teardown again, "
                f"or check those nodes with `sinfo -N`"
            )
    if report.cancelled:
        record_exit(paths, STOPPED_RC, f"cancelled by slurm-rl teardown (was {state.state})", Cause(CANCELLED))
    report.seconds = time.monotonic() - t0
    append_event(paths.events, "teardown_done", killed=report.killed_total, seconds=round(report.seconds, 3))
    return report


@dataclass
class Target:
    """One SLURM job to stop: the job itself, or one of its member jobs (--heal's, grow's)."""

    slurm_id: int | str
    nodes: list[str]
    state: JobState
    member: int | None = None


def member_targets(events: list[dict[str, Any]], client: SlurmClient) -> list[Target]:
    out = []
    for member in member_jobs(events):
        sid = member.get("slurm_job")
        if not isinstance(sid, int):
            continue
        state = client.job_state(sid)
        listed = state.nodelist not in ("", "(null)", "None", None)
        nodes = expand_hostlist(state.nodelist) if listed else [n for n in member["nodes"] if n]
        out.append(Target(sid, nodes, state, member["member"]))
    return out


def stop_inside(
    paths: JobPaths, job_id: int | str, client: SlurmClient, targets: list[Target], grace_s: float
) -> list[dict[str, Any]]:
    """Stop the processes of each running job (the job's, each member's) inside its live
    allocation, before any cancel: srun --overlap needs no new allocation, which a node full of
    other jobs (or of this job's GPUs) could not give, and a step whose processes are gone ends
    at once on the cancel instead of after SLURM's KillWait. Per node, what was stopped."""
    argv = cleanup_command(paths, job_id, grace_s, inside=True)
    reports: list[dict[str, Any]] = []
    for t in targets:
        if t.state.state == "RUNNING" and t.nodes:
            res = client.run_on_nodes(client.numeric_job_id(t.slurm_id), t.nodes, argv)
            reports = merge_reports(reports, parse_reports(res.stdout))
    return reports


def cancel_all(paths: JobPaths, client: SlurmClient, targets: list[Target], gone_timeout_s: float) -> set[int | str]:
    """scancel every target still queued, then wait (one bound for all) for them to leave the
    queue: the bootstraps clean up on SIGTERM. The ids cancelled."""
    cancelled: set[int | str] = set()
    for t in targets:
        if t.state.in_queue:
            client.scancel(t.slurm_id)
            cancelled.add(t.slurm_id)
            member = {} if t.member is None else {"member": t.member, "slurm_job": t.slurm_id}
            append_event(paths.events, "teardown_cancel", **member, state=t.state.state)
    end = time.monotonic() + gone_timeout_s
    waiting = set(cancelled)
    while waiting and time.monotonic() < end:
        waiting = {j for j in waiting if client.job_state(j).in_queue}
        if waiting:
            time.sleep(0.2)
    return cancelled


def site_flags(paths: JobPaths) -> list[str]:
    """The account, QOS and reservation the job was submitted with: a cleanup step outside the
    job's allocation needs them where the site enforces them. (Not the partition: a job with a
    CPU head spans two, and one step cannot; the nodes are named explicitly.)"""
    try:
        m = load_manifest(paths.manifest)
    except JobError:
        return []
    return step_flags(m.account, m.qos, m.reservation)


CLEANUP_SHELL = Path(__file__).resolve().parent.parent / "job" / "cleanup_node.sh"


def cleanup_command(paths: JobPaths, job_id: int | str, grace_s: float, inside: bool = False) -> list[str]:
    """argv of the cleanup step on the job's nodes. A container job's is plain
    shell on the bare node (job/cleanup_node.sh): no python there, and starting the image again
    would unpack it on every node; it also removes what the runtime left (runtimes/). Other jobs
    run the job's own python; a pre-manifest job the login node's. ``inside``: a pass inside the
    live allocation, which spares the node bootstraps (see job/cleanup.py)."""
    try:
        manifest = load_manifest(paths.manifest)
    except JobError:
        return [sys.executable, "-m", "slurm_rl.job.cleanup", "--job-id", str(job_id), "--grace-s", str(grace_s)]
    temp_dir = manifest.temp_dir(job_id)
    runtime = runtime_of(manifest.container.runtime)
    if runtime.contained:
        script, leftovers = CLEANUP_SHELL.read_text(), runtime.leftovers_shell()
        return ["bash", "-c", script, "slurm-rl-cleanup", str(job_id), str(grace_s), temp_dir, leftovers]
    return [
        manifest.python,
        "-m",
        "slurm_rl.job.cleanup",
        *("--job-id", str(job_id), "--grace-s", str(grace_s), "--temp-dir", temp_dir),
        *(["--hold-bootstraps"] if inside else []),
    ]


def parse_reports(stdout: str) -> list[dict[str, Any]]:
    out = []
    for line in stdout.splitlines():
        try:
            item = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(item, dict) and "node" in item:
            out.append(item)
    return out


def merge_reports(first: list[dict[str, Any]], second: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per node, what both passes stopped."""
    by_node: dict[str, dict[str, Any]] = {}
    for item in [*first, *second]:
        cur = by_node.setdefault(
            item["node"],
            {
                "node": item["node"], "killed": [], "temp_dir_removed": False, "containers_removed": [],
                "seconds": 0.0, "cleaned_at_end": False,
            },
        )  # fmt: skip
        cur["cleaned_at_end"] = cur["cleaned_at_end"] or item.get("cleaned_at_end", False)
        cur["killed"] += item.get("killed", [])
        cur["containers_removed"] += item.get("containers_removed", [])
        cur["temp_dir_removed"] = cur["temp_dir_removed"] or item.get("temp_dir_removed", False)
        cur["seconds"] += item.get("seconds", 0.0)
    return [by_node[n] for n in sorted(by_node)]
