"""The pictures of a job (matplotlib, no display needed): ``metrics.png`` (every numeric
metric of ``metrics.jsonl`` per step, one panel each, attempts in their own colour) and
``timeline.png`` (from ``events.jsonl`` and the metrics: when the job was submitted, each
node came up, the driver connected, each step ran, requeues and the end). Written into the job
dir by ``plot_job``, which the example calls at its end and ``slurm-rl plot JOBID`` calls for
any job."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ...core.events import read_events
from ...core.paths import JobPaths
from ...driver.metrics import read_metrics

SKIP = {"t", "attempt", "step"}


def pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_metrics(rows: list[dict[str, Any]], out: Path, title: str = "") -> Path | None:
    keys = [
        k
        for k in dict.fromkeys(k for r in rows for k in r)
        if k not in SKIP and all(isinstance(r.get(k), (int, float)) for r in rows if k in r)
    ]
    if not rows or not keys:
        return None
    keys.sort(key=lambda k: (k != "reward", k))
    plt = pyplot()
    fig, axes = plt.subplots(len(keys), 1, figsize=(7, 2.2 * len(keys)), sharex=True, squeeze=False)
    for ax, key in zip(axes[:, 0], keys):
        for attempt in sorted({r.get("attempt", 0) for r in rows}):
            pts = [
                (r.get("step", i), r[key]) for i, r in enumerate(rows) if key in r and r.get("attempt", 0) == attempt
            ]
            if pts:
                ax.plot(*zip(*pts), marker=".", label=f"attempt {attempt}")
        ax.set_ylabel(key)
        ax.grid(alpha=0.3)
    axes[0, 0].legend(loc="best", fontsize="small")
    axes[-1, 0].set_xlabel("step")
    axes[0, 0].set_title(f"{title}: metrics per step" if title else "metrics per step")
    fig.tight_layout()
    fig.savefig(out, dpi=90)
    plt.close(fig)
    return out


def plot_timeline(events: list[dict[str, Any]], rows: list[dict[str, Any]], out: Path, title: str = "") -> Path | None:
    stamped = [e for e in events if isinstance(e.get("t"), (int, float))]
    if not stamped:
        return None
    t0 = min(e["t"] for e in stamped)
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8, 3.2))
    lanes: dict[str, int] = {}

    def lane(name: str) -> int:
        return lanes.setdefault(name, len(lanes))

    for e in stamped:
        name = e["event"] + (f" {e['host']}" if e["event"] == "node_up" and e.get("host") else "")
        ax.plot(e["t"] - t0, lane(name), "o", color="tab:blue" if e["event"] != "requeue" else "tab:red")
    for r in rows:
        if "step_s" in r and "t" in r:
            ax.barh(lane("steps"), r["step_s"], left=r["t"] - r["step_s"] - t0, height=0.5, color="tab:green")
    ax.set_yticks(list(lanes.values()), list(lanes.keys()), fontsize="small")
    ax.set_xlabel("seconds since the first event")
    ax.set_title(f"{title}: timeline" if title else "timeline")
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    fig.savefig(out, dpi=90)
    plt.close(fig)
    return out


def redraw_after_end(paths: JobPaths) -> list[Path]:
    """After a job ended (``submit --wait``, ``run``): redraw the pictures a job logged metrics
    for, so its timeline has the end events (a driver that drew them could not)."""
    if not paths.metrics.exists():
        return []
    try:
        return plot_job(paths.job_dir)
    except Exception:  # noqa: BLE001 - pictures are a bonus: never fail a finished job over them
        return []


def plot_job(job_dir: str | Path) -> list[Path]:
    """Write metrics.png and timeline.png into the job dir (what there is data for)."""
    paths = JobPaths(Path(job_dir))
    rows = read_metrics(paths.metrics)
    events = read_events(paths.events) if paths.events.exists() else []
    title = f"{paths.name_dir.name}, job {paths.job_id}"
    made = [
        plot_metrics(rows, paths.plot("metrics"), title),
        plot_timeline(events, rows, paths.plot("timeline"), title),
    ]
    return [p for p in made if p is not None]
