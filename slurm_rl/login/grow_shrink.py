"""`slurm-rl grow` and `slurm-rl shrink` (docs/healing.md): a member job adds nodes to a running
job's Ray cluster, and leaves it again, while the job goes on.

A grown member is submitted from here (where SLURM's client is) with the job's member script
(rendered at submit, core/members.py has its files): its nodes join the job's Ray cluster as
workers, with the job's token, ports and tags, never on a node the job has or had, for at most
the time the job has left. The head's watcher (job/member_watch.py) records its nodes joining and
leaving; a grown member that leaves (shrunk, preempted, failed) is never replaced."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass

from ..core.errors import JobError, SlurmCommandError, UsageError
from ..core.events import append_event, read_events, read_json, write_atomic
from ..core.fields import time_minutes
from ..core.job_ids import JobId, is_local
from ..core.manifest import load_manifest
from ..core.members import GROW, Request, claim_member, member_jobs
from ..core.nodelist import expand_hostlist
from ..core.options import JobOptions
from ..core.paths import JobPaths
from ..slurm import SlurmClient
from .submission.preflight import check_partition_size, check_qos, check_time_limit
from .submission.submit import sbatch_refusal

POLL_S = 0.5
PROGRESS_S = 10.0


@dataclass(frozen=True)
class Grown:
    member: int
    slurm_job: int
    time: str
    nodes: list[str]  # the nodes that joined (empty without waiting)


def _running(job_id: JobId, paths: JobPaths, client: SlurmClient, what: str) -> tuple[dict, str, str]:
    """The job's cluster.json, name and time left, or one line why `what` cannot be done now."""
    if paths.exit_code.exists():
        raise UsageError(f"job {job_id} has ended (`slurm-rl status {job_id}`); {what} needs a running job")
    state, name, left = client.queue_summary(job_id)
    if state != "RUNNING":
        raise UsageError(f"job {job_id} is {state or 'not in the queue'}; {what} needs a running job")
    cluster = read_json(paths.cluster)
    if not cluster or not cluster.get("address"):
        raise UsageError(
            f"job {job_id}'s Ray cluster is not up yet; try again once `slurm-rl status {job_id}` says ready"
        )
    return cluster, name, left if left not in ("", "INVALID", "NOT_SET") else "UNLIMITED"


def grow(
    job_id: JobId,
    paths: JobPaths,
    client: SlurmClient,
    nodes: int,
    partition: str | None = None,
    qos: str | None = None,
    time_limit: str | None = None,
    wait_s: float = 0.0,
    say: Callable[[str], None] = print,
) -> Grown:
    """Submit member job N with ``nodes`` nodes to ``job_id``; with ``wait_s``, wait for them to
    join its Ray cluster (saying how it goes)."""
    if is_local(job_id):
        raise UsageError(f"job {job_id} is a local run (`slurm-rl run`): grow adds SLURM nodes to a SLURM job")
    if not paths.member_script.exists():
        raise UsageError(
            f"job {job_id} has no member script ({paths.member_script}): a job with a CPU head "
            "(--head-partition) or of parts (--parts: grow a part in its parts file) cannot grow, nor one "
            "submitted by an older slurm-rl"
        )
    cluster, name, left = _running(job_id, paths, client, "grow")
    when = left
    if time_limit and time_minutes(time_limit) > time_minutes(left, limit=False):  # UNLIMITED: inf
        say(f"--time {time_limit} is more than job {job_id} has left ({left}): the member gets {left}")
    elif time_limit:
        when = time_limit
    _site_limits(client, nodes, partition, qos, when)
    manifest = load_manifest(paths.manifest)
    ours = {*cluster.get("nodes", []), *(n for m in member_jobs(read_events(paths.events)) for n in m["nodes"])}
    exclude = ",".join(filter(None, [manifest.exclude or "", *sorted(ours)]))
    n = claim_member(paths.members, Request(nodes, exclude, GROW))
    # the member's environment: this one without the caller's own SLURM_* (sbatch reads some as options)
    clean = [w for v in sorted(os.environ) if v.startswith("SLURM_") and v != "SLURM_CONF" for w in ("-u", v)]
    env = [*clean, f"SLURM_RL_JOB_DIR={paths.job_dir}", f"SLURM_RL_MEMBER={n}"]
    env.append(f"SLURM_RL_ATTEMPT={int(cluster.get('attempt') or 0)}")
    flags = [
        *(f"--nodes={nodes}", f"--time={when}", f"--exclude={exclude}"),
        *(f"--job-name={name or 'slurm-rl'}.member{n}", f"--output={paths.member_log(n)}"),
        f"--comment=slurm-rl member {n} of job {job_id}",
        *([f"--partition={partition}"] if partition else []),
        *([f"--qos={qos}"] if qos else []),
    ]
    try:
        sid = client.sbatch(str(paths.member_script), extra=flags, env=env)
    except SlurmCommandError as exc:
        said = (exc.stderr.strip() or exc.stdout.strip()).splitlines()
        why = said[-1] if said else f"sbatch exited {exc.returncode}"
        write_atomic(paths.members / f"{n}.error", why + "\n")
        append_event(paths.events, "member_refused", member=n, error=why, kind=GROW)
        raise sbatch_refusal(exc) from None  # a refusal: exit 2, sbatch's reason; no answer: exit 1
    write_atomic(paths.members / f"{n}.job", f"{sid}\n")
    append_event(
        paths.events, "member_submitted", member=n, slurm_job=str(sid), kind=GROW, nodes=nodes, time=when,
        exclude=exclude, partition=partition, qos=qos,
    )  # fmt: skip
    say(f"job {job_id}: member {n} is SLURM job {sid} ({nodes} node(s), --time {when})")
    joined = _wait_joined(job_id, paths, client, n, sid, nodes, wait_s, say) if wait_s > 0 else []
    return Grown(n, sid, when, joined)


def _site_limits(client: SlurmClient, nodes: int, partition: str | None, qos: str | None, when: str) -> None:
    """What the partition or the QOS would refuse or leave pending forever, refused before the
    queue by submit's own checks (login/submission/preflight.py), in their words. Without --partition the
    member goes to its job's partition, where the job itself already passed them."""
    opts = JobOptions(nodes=nodes, partition=partition, qos=qos, time=None if when == "UNLIMITED" else when)
    if partition:
        check_partition_size(opts, client)
        check_time_limit(opts, client)
    check_qos(opts, client)


def _wait_joined(
    job_id: JobId,
    paths: JobPaths,
    client: SlurmClient,
    n: int,
    sid: int,
    nodes: int,
    wait_s: float,
    say: Callable[[str], None],
) -> list[str]:
    start = time.monotonic()
    said = start
    while True:
        member = next((m for m in member_jobs(read_events(paths.events)) if m["member"] == n), None)
        joined = list(member["nodes"]) if member else []
        if len(joined) >= nodes:
            say(f"job {job_id}: member {n} joined on {', '.join(joined)} in {time.monotonic() - start:.1f} s")
            return joined
        if paths.exit_code.exists():
            raise JobError(f"job {job_id} ended while member {n} (SLURM job {sid}) was joining")
        state = client.job_state(sid)
        if not state.in_queue and state.state not in ("RUNNING", "UNKNOWN"):
            raise JobError(
                f"member {n} (SLURM job {sid}) ended {state.state} before its nodes joined job {job_id}; "
                f"see {paths.member_log(n)}"
            )
        if time.monotonic() - said >= PROGRESS_S:
            said = time.monotonic()
            why = f" ({state.reason})" if state.reason and state.reason != "None" else ""
            say(f"job {job_id}: member {n} is {state.state}{why}; {len(joined)}/{nodes} node(s) joined")
        if time.monotonic() - start > wait_s:
            raise JobError(
                f"member {n} (SLURM job {sid}) has not joined job {job_id} within {wait_s:g} s; it stays "
                f"queued: `slurm-rl shrink {job_id} --member {n}` releases it"
            )
        time.sleep(POLL_S)


def pick_member(job_id: JobId, paths: JobPaths, member: int | None, node: str | None) -> dict:
    members = member_jobs(read_events(paths.events))
    grown = [m for m in members if m["kind"] == GROW]
    found = [m for m in grown if m["member"] == member or (node and node in m["nodes"])]
    if not found:
        known = ", ".join(f"{m['member']} ({', '.join(m['nodes']) or m['state']})" for m in grown) or "none"
        what = f"member {member}" if member is not None else f"a member on node {node}"
        heal = [m for m in members if m["kind"] != GROW and (m["member"] == member or node in m["nodes"])]
        hint = "; it replaces a lost node (--heal): only grown members shrink" if heal else ""
        raise UsageError(f"job {job_id} has no grown {what}{hint} (grown members: {known})")
    return found[0]


def shrink(
    job_id: JobId,
    paths: JobPaths,
    client: SlurmClient,
    member: int | None = None,
    node: str | None = None,
    drain_s: float = 10.0,
    gone_s: float = 60.0,
    say: Callable[[str], None] = print,
) -> dict:
    """Release a grown member: its Ray nodes drain (the head's watcher: no new work there), then
    its SLURM job is cancelled (its bootstraps stop their Ray nodes on SIGTERM); the job goes on."""
    m = pick_member(job_id, paths, member, node)
    n, sid = m["member"], m["slurm_job"]
    state = client.job_state(sid) if isinstance(sid, int) else None
    if state is None or not state.in_queue:
        say(f"job {job_id}: member {n} already left ({state.state if state else 'never submitted'})")
        return m
    write_atomic(paths.members / f"{n}.shrink", f"{time.time():.3f}\n")
    drained = paths.members / f"{n}.drained"
    end = time.monotonic() + drain_s
    while state.state == "RUNNING" and not drained.exists() and time.monotonic() < end:
        time.sleep(POLL_S)
    if drained.exists():
        say(f"job {job_id}: member {n}'s Ray nodes drained ({drained.read_text().strip() or 'none up'})")
    client.scancel(sid)
    end = time.monotonic() + gone_s
    while client.job_state(sid).in_queue:
        if time.monotonic() > end:
            raise JobError(f"member {n} (SLURM job {sid}) is still in the queue {gone_s:g} s after its cancel")
        time.sleep(POLL_S)
    released = ", ".join(expand_hostlist(state.nodelist)) or "-"
    say(f"job {job_id}: member {n} (SLURM job {sid}) left; its nodes released: {released}")
    return m
