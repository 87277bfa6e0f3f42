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


def table(title: str, rows: list[dict[str, Any]]) -> Any:
    from rich.table import Table

    out = Table(title=title)
    keys = list(rows[0]) if rows else []
    for key in keys:
        out.add_column(key.replace("_bytes", "").replace("_", " "), justify="right" if key != "node" else "left")
    for row in rows:
        out.add_row(*(_cell(k, row.get(k)) for k in keys))
    return out


def print_table(title: str, rows: list[dict[str, Any]]) -> None:
    import sys

    from rich.console import Console

    # a driver log is no terminal: give the table room instead of rich's 80 columns
    Console(width=None if sys.stdout.isatty() else 140).print(table(title, rows))
