"""What `list` and `status` print: one row per job, 80 columns fit, state and phase never
truncated; SLURM is asked twice for all the rows (one squeue, one sacct), not per job.
``show_status`` is the whole of `status`: which jobs, their states, the table or JSON."""

from __future__ import annotations

import json
import math
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import replace

from rich.console import Console
from rich.table import Table

from ...config.spec import ClusterSpec
from ...core.causes import COMPLETED
from ...core.exits import oom_line
from ...core.paths import JobPaths
from ...core.progress import stall_line
from ...slurm import JobRecord, SlurmClient
from .cluster_states import job_cluster_name, states_by_cluster
from .lookup import status_targets
from .summary import JobSummary, summarize, with_place, with_record


def list_rows(
    dirs: Iterable[JobPaths], client: SlurmClient, client_for: Callable[[ClusterSpec], SlurmClient] | None = None
) -> tuple[list[dict[str, str]], list[str]]:
    """`slurm-rl list`'s rows (cluster, job, name, state, submitted, progress, job dir; and the
    job's cluster_name and submit time ``t``, by which a laptop merges clusters' lists), newest
    first as given, and one line per cluster that did not answer."""
    dirs = list(dirs)
    states, cluster_of, silent = states_by_cluster(dirs, client, client_for)  # two SLURM calls per cluster
    rows: list[dict[str, str]] = []
    for p in dirs:
        summary = summarize(p, states[p.job_id])
        state = replace(summary, state=summary.state.split()[0]).shown_state
        t = p.manifest.stat().st_mtime
        ago = short_age(summary.progress.age()) if summary.progress and state.startswith("RUNNING") else ""
        rows.append(
            {
                "cluster": cluster_of.get(p.job_id, "") or ("-" if cluster_of else ""),
                "job": p.job_id,
                "name": p.name_dir.name,
                "state": state,
                "submitted": time.strftime("%m-%d %H:%M", time.localtime(t)),
                "progress": ago,
                "job dir": str(p.job_dir),
                "cluster_name": job_cluster_name(p),
                "t": f"{t:.3f}",
            }
        )
    return rows, silent


def print_list(
    dirs: Iterable[JobPaths], client: SlurmClient, client_for: Callable[[ClusterSpec], SlurmClient] | None = None
) -> None:
    """`slurm-rl list`: id, name, state (squeue's, else SLURM's accounting where the site keeps
    it, else the job dir's exit), when submitted, job dir; a header; 80 columns fit. `status
    JOB` has the elapsed time and memory of a finished job."""
    rows, silent = list_rows(dirs, client, client_for)
    for line in silent:
        print(line, file=sys.stderr, flush=True)
    render_list(rows)


def render_list(rows: list[dict[str, str]]) -> None:
    """The table of ``list_rows``' rows (of one cluster or merged from several)."""
    # ids, states and times stay whole (`slurm-rl list | grep ID` must find the id): the name and
    # the job dir give way, and only where even they cannot, the lines grow past the terminal;
    # "cluster" only with a clusters file; "progress" (a running job's last progress, its age)
    # only when a job has some
    heads = ["cluster", "job", "name", "state", "submitted", "progress", "job dir"]
    if not any(r["progress"] for r in rows):
        heads.remove("progress")
    if not any(r["cluster"] for r in rows):
        heads.remove("cluster")
    cells = [[r[h] or ("-" if h == "cluster" else "") for h in heads] for r in rows]
    console = Console()
    whole = sum(max([len(h)] + [len(c[i]) for c in cells]) for i, h in enumerate(heads) if h not in ("name", "job dir"))
    fixed = whole + (len(heads) - 1) * 2  # the gaps between the columns
    name_width = max(6, min(16, console.width - fixed - 12))
    if fixed + name_width + 12 > console.width:
        console = Console(width=fixed + name_width + 12)
    table = Table(box=None, pad_edge=False)
    for i, head in enumerate(heads):
        if head == "name":
            table.add_column(head, overflow="ellipsis", max_width=name_width, no_wrap=True)
        elif head == "job dir":
            table.add_column(head, overflow="fold", min_width=12)
        else:
            table.add_column(head, no_wrap=True, min_width=max(len(c[i]) for c in cells) if cells else 0)
    for row in cells:
        table.add_row(*row)
    console.print(table)


def print_table(rows: Iterable[JobSummary]) -> None:
    """One row per job; state and phase never truncated (80 columns fit); the job dir is in
    `slurm-rl list` and `status --json`."""
    rows = list(rows)
    table = Table(box=None, pad_edge=False)
    for name, kw in (
        ("job", {}),
        ("name", {"overflow": "ellipsis", "max_width": 24}),
        ("state", {"no_wrap": True}),
        ("phase", {"no_wrap": True}),
        ("nodes", {"no_wrap": True}),
        ("exit", {"no_wrap": True}),
    ):
        table.add_column(name, **kw)
    for r in rows:
        table.add_row(
            str(r.job_id),
            r.paths.name_dir.name,
            r.shown_state,
            r.phase,
            f"{r.nodes_up}/{r.nodes}",
            "" if r.exit_code is None else str(r.exit_code),
        )
    Console().print(table)
    for r in rows:  # what the table has no room for: why it ended, where memory ran out, healing
        said = ended_line(r)
        if said:
            Console().print(f"job {r.job_id}: {said}", markup=False, highlight=False, soft_wrap=True)
        if r.oom and "OOM: " not in said:
            Console().print(f"job {r.job_id}: {oom_line(list(r.oom))}", markup=False, highlight=False, soft_wrap=True)
        if r.ray_deaths and "Ray died: " not in said:
            said = "Ray died: " + "; ".join(d.text() for d in r.ray_deaths)
            Console().print(f"job {r.job_id}: {said}", markup=False, highlight=False, soft_wrap=True)
        for line in healing_lines(r.healing):
            Console().print(f"job {r.job_id}: {line}", markup=False, highlight=False, soft_wrap=True)
        if r.progress is not None and r.state.split()[0] in ("RUNNING", "COMPLETING"):
            when = time.strftime("%H:%M:%S", time.localtime(r.progress.t))
            print(f"job {r.job_id}: last progress {when} ({r.progress.what}), {human_seconds(r.progress.age())} ago")
        if r.stall is not None:
            print(f"job {r.job_id}: {stall_line(r.stall)}")
        if r.waits_for:
            print(f"job {r.job_id}: pending, waiting for {r.waits_for}")
        if r.place:
            print(f"job {r.job_id}: {r.place}")
        for line in parts_lines(r.parts, r.services):
            print(f"job {r.job_id}: {line}")
        if r.time_left_s is not None and not math.isinf(r.time_left_s):
            ends = time.strftime("%H:%M", time.localtime(time.time() + r.time_left_s))
            print(f"job {r.job_id}: {human_seconds(r.time_left_s)} left (SLURM ends it at {ends})", flush=True)


def ended_line(r: JobSummary) -> str:
    """An ended job's cause in words and its reason ("ended: stalled (no progress): stalled for
    60 s ..."); "" while it runs and for a completion (the OOM kills it survived have their line)."""
    if r.cause is None or r.cause.kind == COMPLETED:
        return ""
    return f"ended: {r.cause.words()}" + (f": {r.exit_reason}" if r.exit_reason else "")


_HEALING_TEXT = {
    "node_lost": "{lost} lost (Ray declared it dead)",
    "replacement_requested": "asked for a replacement of {replaces}: member {member}",
    "member_submitted": "member {member} is SLURM job {slurm_job}",
    "member_refused": "member {member} refused by SLURM: {error}",
    "replacement_joined": "{joined} (member {member}) joined for {replaces}, {seconds} s after the loss",
    "member_joined": "{joined} (member {member}) joined",
    "member_draining": "member {member} draining for shrink: {nodes}",
    "member_left": "{left} (member {member}) left: {why}",
    "workers_restored": "worker group {group!r}: workers {workers} restored in {seconds} s",
    "heal_error": "the member watch (healing, members joining and leaving) stopped by an unexpected error: {error}",
    "preflight_replacing": "preflight: {found}; replaced by member {members}",
    "preflight_replaced": "the replacement of {nodes} joined, {seconds} s after preflight's verdict; the driver starts",
    "node_left": "{left} left the job: {why}",
}


def parts_lines(parts: dict, services: dict) -> list[str]:
    """A job of parts, one line per part: a Ray part's state and nodes; a service's ready
    instances, restarts, URL and nodes."""
    out = []
    for name, part in parts.items():
        where = ",".join(part.get("nodes") or []) or "no node yet"
        svc = services.get(name)
        if svc is None:
            out.append(f"part {name}: {part['state']} on {where}")
            continue
        said = [f"{svc['ready']}/{svc['total']} ready"]
        said += [f"{svc['restarts']} restart(s)"] if svc["restarts"] else []
        said += [svc["url"]] if svc.get("url") else []
        out.append(f"service {name}: {part['state']}, {', '.join(said)}, on {where}")
    return out


def short_age(seconds: float) -> str:
    """An age in one short word: ``42s``, ``3m``, ``2h``, ``1d``."""
    s = int(seconds)
    return f"{s}s" if s < 60 else f"{s // 60}m" if s < 3600 else f"{s // 3600}h" if s < 86400 else f"{s // 86400}d"


def human_seconds(seconds: float) -> str:
    """``75`` -> ``1 min 15 s``, ``7300`` -> ``2 h 1 min``: a time left as people read it."""
    s = int(seconds)
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min" + (f" {s % 60} s" if s % 60 else "")
    return f"{s // 3600} h" + (f" {s % 3600 // 60} min" if s % 3600 // 60 else "")


def healing_lines(history: Iterable[dict]) -> list[str]:
    """A healing job's history (--heal), one line per event, with its time of day."""
    out = []
    for e in history:
        when = time.strftime("%H:%M:%S", time.localtime(float(e.get("t", 0))))
        try:
            shown = {k: ", ".join(map(str, v)) if isinstance(v, list) else v for k, v in e.items()}
            out.append(f"{when} " + _HEALING_TEXT[e["event"]].format(**shown))
        except (KeyError, IndexError):
            out.append(f"{when} {e.get('event')}")
    return out


def show_status(job: str | None, user: str, client: SlurmClient, spec: ClusterSpec | None, as_json: bool) -> None:
    """`slurm-rl status [JOB]`: one job (with SLURM's accounting record once it ended), every
    task of a sweep (its array id), or your ten most recent jobs; a table, or JSON lines."""
    targets = status_targets(job, user, client, spec)
    rows = [summarize(paths, state) for paths, state in targets]
    if job is not None and len(rows) == 1:  # one job: its place in the queue, or what accounting kept
        rows = [with_record(with_place(rows[0], client), client)]
    if as_json:
        for r in rows:
            print(json.dumps(r.as_dict()), flush=True)
        return
    print_table(rows)
    for r in rows:
        if r.record is not None:
            print(record_line(r.record), flush=True)


def record_line(record: JobRecord) -> str:
    """SLURM's accounting record in one line, for people."""
    rss = ", ".join(f"{node} {size}" for node, size in record.max_rss.items())
    return f"SLURM accounting: {record.state}, exit code {record.exit_code}, elapsed {record.elapsed}" + (
        f"; max RSS per node: {rss}" if rss else ""
    )
