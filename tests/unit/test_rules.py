"""The house rules the docs state, held on the code (docs/architecture.md): one caller of SLURM.
Each test names the line that breaks its rule."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.unit

PKG = REPO / "slurm_rl"
SLURM_PKG = PKG / "slurm"
# every SLURM client command (slurm.schedmd.com/man_index.html)
SLURM_COMMANDS = frozenset(
    [
        "sacct",
        "sacctmgr",
        "salloc",
        "sattach",
        "sbatch",
        "sbcast",
        "scancel",
        "scontrol",
        "scrontab",
        "sdiag",
        "sh5util",
        "sinfo",
        "sprio",
        "squeue",
        "sreport",
        "srun",
        "sshare",
        "sstat",
        "strigger",
        "sview",
    ]
)


def slurm_commands_named(path: Path, root: Path = REPO) -> list[str]:
    """Each place ``path`` names a SLURM command as a program: a string that is the command's
    name, or the first word of an argv (list, tuple or a call's first argument) that starts with one."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        firsts = []
        if isinstance(node, (ast.List, ast.Tuple)) and node.elts:
            firsts.append(node.elts[0])
        if isinstance(node, ast.Call) and node.args:
            firsts.append(node.args[0])
        for item in [node, *firsts]:
            if not (isinstance(item, ast.Constant) and isinstance(item.value, str)):
                continue
            words = item.value.split()
            exact = item is node and item.value in SLURM_COMMANDS
            if exact or (item is not node and words and words[0] in SLURM_COMMANDS):
                found.append(f"{path.relative_to(root)}:{item.lineno}: {item.value!r}")
    return sorted(set(found))


def test_no_module_outside_slurm_names_a_slurm_command() -> None:
    """slurm/ is the one caller of SLURM, on the login side (SlurmClient) and the nodes'
    (slurm/from_node.py): elsewhere a SLURM command is never a program to run."""
    outside = [p for p in PKG.rglob("*.py") if SLURM_PKG not in p.parents]
    assert [hit for path in sorted(outside) for hit in slurm_commands_named(path)] == []


def test_the_rule_sees_each_way_a_module_runs_slurm(tmp_path: Path) -> None:
    planted = tmp_path / "planted.py"
    planted.write_text(
        "import shutil, subprocess\n"
        'subprocess.run(["scancel", job])\n'
        'shutil.which("sbatch")\n'
        'subprocess.run("squeue -h -j 7", shell=True)\n'
        'print(f"sbatch refused the job: {why}")\n'  # a message about a command is not a call
    )
    assert slurm_commands_named(planted, tmp_path) == [
        "planted.py:2: 'scancel'",
        "planted.py:3: 'sbatch'",
        "planted.py:4: 'squeue -h -j 7'",
    ]
