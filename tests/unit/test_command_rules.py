"""House rules of the commands and the imports (docs/architecture.md), held on the code: every
job command gets its job argument, --spec, --json and --login from one mechanism (login/commands/job_command.py)
and its SLURM client from one place; no module imports another's private name; no import circle,
function-local imports included. Each rule's test names what breaks it; a second test shows the
rule sees a breach."""

from __future__ import annotations

import ast
from pathlib import Path

import click
import pytest

from slurm_rl.login.cli import cli
from slurm_rl.login.commands.job_command import RemoteCommand
from tests.conftest import REPO

pytestmark = pytest.mark.unit

PKG = REPO / "slurm_rl"
LOCAL_ONLY = {"run", "spec validate", "spec show", "clusters add", "clusters remove"}  # no SLURM, or a local file
# NeMo RL's own underscored names, which its users import from its modules and the facades keep
# name for name (../shared/docs/): re-exported where NeMo RL has them, not private here
NEMO_RL_NAMES = {"_init_ray", "_get_free_port_local", "_sort_bundle_indices_by_topology", "_parse_extra_options"}


def commands(group: click.Group, prefix: str = "") -> dict[str, click.Command]:
    out: dict[str, click.Command] = {}
    for name, cmd in group.commands.items():
        path = f"{prefix}{name}"
        if isinstance(cmd, click.Group):
            out.update(commands(cmd, f"{path} "))
        else:
            out[path] = cmd
    return out


def test_every_command_that_may_run_on_a_login_node_has_login_and_every_job_command_spec() -> None:
    found = commands(cli)
    remote = {n for n, c in found.items() if isinstance(c, RemoteCommand)}
    assert set(found) - remote == LOCAL_ONLY, sorted(set(found) - remote)
    for name in remote:
        params = {p.name for p in found[name].params}
        assert "login" in params, name
        if params & {"job", "array_id"}:  # a job command: its job, its spec
            assert "spec_flag" in params, name


def module_name(path: Path, root: Path) -> str:
    parts = list(path.with_suffix("").relative_to(root.parent).parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def runtime_imports(path: Path, root: Path, known: set[str]) -> list[tuple[str, int, str]]:
    """(module, line, the name imported) of every import ``path`` runs (function-local ones too;
    ``if TYPE_CHECKING:`` blocks are for the type checker only)."""
    tree = ast.parse(path.read_text())
    typing_only = {
        id(n)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
        for stmt in node.body
        for n in ast.walk(stmt)
    }
    me = module_name(path, root)
    package = me if path.name == "__init__.py" else me.rpartition(".")[0]
    out = []
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
            target = ".".join([*base, node.module] if node.module else base)
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                out.append((sub if sub in known else target, node.lineno, alias.name))
        elif isinstance(node, ast.Import):
            out += [(a.name, node.lineno, a.name) for a in node.names]
    return [(m, line, name) for m, line, name in out if m in known and m != me]


def import_circles(root: Path) -> list[list[str]]:
    files = {module_name(p, root): p for p in root.rglob("*.py")}
    graph = {m: {t for t, _, _ in runtime_imports(p, root, set(files))} for m, p in files.items()}
    circles, done = [], set()

    def walk(m: str, trail: list[str]) -> None:
        for nxt in sorted(graph[m]):
            if nxt in trail:
                circle = trail[trail.index(nxt) :]
                if not done & set(circle):
                    circles.append([*circle, nxt])
            elif nxt not in done:
                walk(nxt, [*trail, nxt])
        done.add(m)

    for m in sorted(graph):
        if m not in done:
            walk(m, [m])
    return circles


def test_no_import_circle_even_through_a_function_local_import() -> None:
    assert import_circles(PKG) == []


def test_the_circle_rule_sees_a_function_local_circle(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from .b import g\n\ndef f():\n    return g()\n")
    (pkg / "b.py").write_text("def g():\n    from .a import f\n    return f\n")
    (pkg / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .a import f\n")
    assert import_circles(pkg) == [["pkg.a", "pkg.b", "pkg.a"]]


def private_imports(root: Path) -> list[str]:
    files = {module_name(p, root): p for p in root.rglob("*.py")}
    return [
        f"{p.relative_to(root.parent)}:{line}: {name} from {target}"
        for m, p in files.items()
        for target, line, name in runtime_imports(p, root, set(files))
        if name.startswith("_") and not name.startswith("__") and name not in NEMO_RL_NAMES
    ]


def test_no_module_imports_another_ones_private_name() -> None:
    assert private_imports(PKG) == []


def test_the_private_rule_sees_one_and_allows_a_private_alias(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("def lazy():\n    from .a import f as _f\n    return _f\n")
    (pkg / "a.py").write_text("def f(): ...\ndef _g(): ...\n")
    (pkg / "b.py").write_text("from .a import _g\n")
    assert private_imports(pkg) == ["pkg/b.py:1: _g from pkg.a"]


def test_the_commands_make_their_slurm_client_in_one_place_and_the_api_in_one() -> None:
    made = [
        f"{p.relative_to(REPO)}:{node.lineno}"
        for p in PKG.rglob("*.py")
        for node in ast.walk(ast.parse(p.read_text()))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "SlurmClient"
    ]
    where = sorted({m.split(":")[0] for m in made})
    assert where == ["slurm_rl/login/api.py", "slurm_rl/login/commands/job_command.py"] and len(made) == 2, made
