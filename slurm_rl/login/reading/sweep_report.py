"""Looking at a sweep: every task's state (one squeue call for all of them), following the
whole array until its last task ended (``sweep --wait``), and ``sweep-summary``: a table of
each task's arguments, state and last metrics, the failed tasks with their reason, and one
comparison plot (a metric per step, a line per task) in the sweep's dir."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from ...core.causes import COMPLETED
from ...core.job_ids import as_slurm_id
from ...driver.metrics import read_metrics
from ...slurm import JobState, SlurmClient
from ..sweep import Sweep
from .lookup import job_state_for
from .plots import SKIP, pyplot
from .summary import JobSummary, end_line, summarize

POLL_MIN_S, POLL_MAX_S = 2.0, 15.0  # as for one job: gentle on slurmctld


@dataclass(frozen=True)
class TaskView:
    task: int
    point: dict[str, str]
    summary: JobSummary

    @property
    def failed(self) -> bool:
        """It ended of any cause but completion (core/ending.py decided it), or with a bad exit."""
        cause = self.summary.cause
        return self.summary.exit_code not in (0, None) or (cause is not None and cause.kind != COMPLETED)

    @property
    def ended(self) -> bool:
        """SLURM's state is final (out of the queue, or forgotten); the job dir's job_end alone
        is not: SLURM says RUNNING or COMPLETING a while after it."""
        return not JobState(0, self.summary.state).in_queue


def task_views(sweep: Sweep, client: SlurmClient, ended: dict[int, TaskView] | None = None) -> list[TaskView]:
    """Every task's summary: queued tasks from one squeue call, the others from their job dir
    and SLURM's record; tasks in ``ended`` (already seen ended) are not asked about again."""
    queued = client.my_queue()
    views = []
    for t, paths in zip(sweep.tasks, sweep.task_paths()):
        if ended and int(str(t["task"])) in ended:
            views.append(ended[int(str(t["task"]))])
            continue
        state = queued.get(as_slurm_id(paths.job_id))
        if state is None:
            state = job_state_for(paths, client)
        views.append(TaskView(int(str(t["task"])), dict(t.get("point") or {}), summarize(paths, state)))  # type: ignore[call-overload]
    return views


def point_text(point: dict[str, str]) -> str:
    return " ".join(f"{k}={v}" for k, v in point.items()) or "-"


def wait_for_sweep(sweep: Sweep, client: SlurmClient, quiet: bool = False) -> list[TaskView]:
    """Follow every task until the last one ended; a line whenever a task's state changes."""
    console = Console(stderr=True)
    seen: dict[int, str] = {}
    ended: dict[int, TaskView] = {}  # with its exit known: SLURM is not asked about it again
    interval = POLL_MIN_S
    while True:
        views = task_views(sweep, client, ended)
        ended.update({v.task: v for v in views if v.ended and v.summary.exit_code is not None})
        for v in views:
            text = f"{v.summary.state}, {v.summary.phase}"
            if seen.get(v.task) != text and not quiet:
                console.print(
                    f"sweep {sweep.array_id} task {v.task} ({point_text(v.point)}): {text}",
                    markup=False,
                    highlight=False,
                )
            seen[v.task] = text
        if all(v.ended for v in views):
            break
        time.sleep(interval)
        interval = min(interval * 1.5, POLL_MAX_S)
    # a task that just ended may write its exit code a moment after SLURM says so
    deadline = time.monotonic() + 5
    while any(v.summary.exit_code is None for v in views) and time.monotonic() < deadline:
        time.sleep(0.2)
        views = task_views(sweep, client, ended)
        ended.update({v.task: v for v in views if v.summary.exit_code is not None})
    return views


def last_metrics(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The last value of every numeric metric (and the last step)."""
    out: dict[str, Any] = {}
    for r in rows:
        for k, v in r.items():
            if (k == "step" or k not in SKIP) and isinstance(v, (int, float)) and not isinstance(v, bool):
                out[k] = v
    return out


def choose_metric(per_task: list[list[dict[str, Any]]], asked: str | None) -> str | None:
    """``asked``, else ``reward`` where logged, else the first numeric metric any task logged."""
    keys = [k for rows in per_task for k in last_metrics(rows) if k != "step"]
    if asked:
        return asked
    if "reward" in keys:
        return "reward"
    return keys[0] if keys else None


def task_metrics(sweep: Sweep) -> list[list[dict[str, Any]]]:
    """Every task's ``metrics.jsonl`` rows, read once for the table and the plot."""
    return [read_metrics(paths.metrics) for paths in sweep.task_paths()]


def plot_comparison(
    sweep: Sweep, views: list[TaskView], metrics: list[list[dict[str, Any]]], metric: str, out: Path
) -> Path | None:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 3.6))
    drawn = 0
    for v, task_rows in zip(views, metrics):
        rows = [r for r in task_rows if isinstance(r.get(metric), (int, float))]
        if not rows:
            continue
        ax.plot(
            [r.get("step", i) for i, r in enumerate(rows)],
            [r[metric] for r in rows],
            marker=".",
            label=f"{v.task}: {point_text(v.point)}",
        )
        drawn += 1
    if not drawn:
        plt.close(fig)
        return None
    ax.set_xlabel("step")
    ax.set_ylabel(metric)
    ax.set_title(f"sweep {sweep.array_id} ({sweep.record.get('name')}): {metric} per step")
    ax.grid(alpha=0.3)
    ax.legend(loc="best", fontsize="small")
    fig.tight_layout()
    fig.savefig(out, dpi=90)
    plt.close(fig)
    return out


def summary_rows(sweep: Sweep, views: list[TaskView], metrics: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """One dict per task: what `sweep-summary --json` prints."""
    rows = []
    for v, paths, task_rows in zip(views, sweep.task_paths(), metrics):
        rows.append(
            {
                "task": v.task,
                "job_id": paths.job_id,
                "point": v.point,
                "state": v.summary.state,
                "exit_code": v.summary.exit_code,
                "reason": v.summary.exit_reason if v.failed else "",
                "cause": v.summary.cause.as_dict() if v.failed and v.summary.cause else None,
                "metrics": last_metrics(task_rows),
                "job_dir": str(paths.job_dir),
            }
        )
    return rows


def print_summary(sweep: Sweep, rows: list[dict[str, Any]], metric: str | None, plot: Path | None) -> None:
    console = Console()
    names = list(dict.fromkeys(k for r in rows for k in r["point"]))
    shown = ["step", *([metric] if metric else [])]
    shown += [k for k in dict.fromkeys(k for r in rows for k in r["metrics"]) if k not in shown][
        : max(0, 4 - len(shown))
    ]
    table = Table(box=None, pad_edge=False, title=f"sweep {sweep.array_id}: {sweep.record.get('name')}")
    for col in ["task", *names, "state", "exit", *shown]:
        table.add_column(col, no_wrap=True)
    for r in rows:
        metrics = r["metrics"]
        table.add_row(
            str(r["task"]),
            *[r["point"].get(n, "") for n in names],
            r["state"],
            "" if r["exit_code"] is None else str(r["exit_code"]),
            *[_fmt(metrics.get(k)) for k in shown],
        )
    console.print(table)
    for r in rows:
        if r["reason"]:
            why = f" ({r['cause']['text']})" if r.get("cause") else ""
            console.print(f"task {r['task']} ({r['job_id']}) failed{why}: {r['reason']}", markup=False, highlight=False)
    if plot is not None:
        console.print(f"plot: {plot}", markup=False, highlight=False)


def _fmt(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def failure_lines(sweep: Sweep, views: list[TaskView]) -> list[str]:
    """How each failed task ended (end_line: state, exit, reason, the driver's error)."""
    return [f"task {v.task} ({point_text(v.point)}): " + end_line(v.summary) for v in views if v.failed]
