"""Rich tables of a worker group's status and resource usage (print_worker_status,
print_resource_usage): sizes in MiB, empty cells for what is unknown."""

from __future__ import annotations

from typing import Any


def _cell(key: str, value: Any) -> str:
    if value is None:
        return ""
    if key.endswith("_bytes"):
        return f"{value / 2**20:.0f} MiB"
    if isinstance(value, float):
        return f"{value:.1f}"
    return str(value)


# Short headers: the tables land in driver logs that people read with `logs -f` at 80 columns.
HEADERS = {
    "current_call": "call",
    "running_s": "for s",
    "restarts": "rst",
    "cpu_percent": "cpu %",
    "rss_bytes": "rss",
    "gpu_memory_bytes": "gpu mem",
    "worker": "#",
}
WIDTH = 80


def table(title: str, rows: list[dict[str, Any]]) -> Any:
    from rich import box
    from rich.table import Table

    out = Table(title=title, box=box.SIMPLE_HEAD, pad_edge=False, padding=(0, 1))
    keys = list(rows[0]) if rows else []
    for key in keys:
        header = HEADERS.get(key, key.replace("_", " "))
        left = key in ("node", "name", "current_call", "state")
        out.add_column(header, justify="left" if left else "right", overflow="fold")
    for row in rows:
        out.add_row(*(_cell(k, row.get(k)) for k in keys))
    return out


def print_table(title: str, rows: list[dict[str, Any]]) -> None:
    import sys

    from rich.console import Console

    # a driver log is no terminal: 80 columns, as `slurm-rl logs -f` shows it
    Console(width=None if sys.stdout.isatty() else WIDTH).print(table(title, rows))
