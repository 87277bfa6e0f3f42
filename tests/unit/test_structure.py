"""The layout's rules, checked on the code: every import stays on its floor or goes down, the
distributed engine never imports a public facade, and no module grows past 300 lines."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.unit

PKG = REPO / "slurm_rl"
# floors, lowest first (docs/architecture.md, "The import rule")
FLOORS = {
    "_version": 1, "core": 1, "data": 1,
    "slurm": 2, "config": 2, "runtimes": 2, "distributed": 2, "driver": 2, "models": 2,
    "login": 3, "job": 3, "utils": 3, "rollouts": 3,
    "laptop": 4, "__init__": 5, "__main__": 5,
}  # fmt: skip
FACADES = {"virtual_cluster", "worker_groups", "batched_data_dict", "named_sharding", "exceptions"}


def modules() -> list[Path]:
    return sorted(PKG.rglob("*.py"))


def top(path: Path) -> str:
    return path.relative_to(PKG).parts[0].removesuffix(".py")


def imported(path: Path) -> list[str]:
    """The slurm_rl modules ``path`` imports, as dotted paths under slurm_rl (lazy ones too)."""
    here = path.relative_to(PKG).with_suffix("").parts
    package = here[:-1]  # a module's package; an __init__.py's own
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                name = ".".join([*base, *(node.module.split(".") if node.module else [])])
            elif node.module and node.module.startswith("slurm_rl"):
                name = node.module.removeprefix("slurm_rl").lstrip(".")
            else:
                continue
            out.append(name)
        elif isinstance(node, ast.Import):
            out += [a.name.removeprefix("slurm_rl").lstrip(".") for a in node.names if a.name.startswith("slurm_rl.")]
    return [n for n in out if n]


def test_no_import_runs_up_a_floor() -> None:
    up = []
    for path in modules():
        mine = FLOORS[top(path)]
        for name in imported(path):
            theirs = FLOORS[name.split(".")[0]]
            if theirs > mine:
                up.append(f"{path.relative_to(REPO)} imports {name} (floor {theirs} > {mine})")
    assert up == []


def test_the_engine_never_imports_a_facade() -> None:
    bad = []
    for path in (PKG / "distributed" / "_engine").rglob("*.py"):
        for name in imported(path):
            parts = name.split(".")
            if parts[0] == "distributed" and len(parts) > 1 and parts[1] in FACADES:
                bad.append(f"{path.relative_to(REPO)} imports {name}")
    assert bad == []


def test_no_module_is_over_300_lines() -> None:
    long = {str(p.relative_to(REPO)): n for p in modules() if (n := len(p.read_text().splitlines())) > 300}
    assert long == {}
