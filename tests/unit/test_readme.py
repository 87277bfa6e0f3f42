"""The README is a newcomer's path: its Python samples run as written (locally, through
`slurm-rl run`), its links stay inside the repository, and its commands exist."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import REPO, run_cli

README = (REPO / "README.md").read_text()
SAMPLES = re.findall(r"```python\n(.*?)```", README, re.S)


@pytest.mark.ray
@pytest.mark.timeout(240)
@pytest.mark.parametrize("index", range(len(SAMPLES)))
def test_readme_python_samples_run_as_written(tmp_path: Path, index: int) -> None:
    sample = tmp_path / f"sample{index}.py"
    sample.write_text(SAMPLES[index])
    env = {"SLURM_RL_INDEX": str(tmp_path / "index.jsonl"), "HOME": str(tmp_path)}
    res = run_cli("run", str(sample), env=env, cwd=tmp_path, timeout=200)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    if "get_all_worker_results" in SAMPLES[index]:
        assert "[2, 2]" in res.stdout


def test_readme_has_samples_links_inside_the_repo_and_real_commands() -> None:
    assert SAMPLES, "the README shows a first experiment"
    for target in re.findall(r"\]\(([^)]+)\)", README):
        assert not target.startswith(("..", "/")) and (REPO / target).exists(), target
    assert "../shared" not in README
    commands = set(re.findall(r"^    slurm-rl ([a-z-]+)", README, re.M))
    assert {"submit", "run", "status", "list", "logs", "plot", "attach", "teardown", "spec"} <= commands
    for command in commands:
        assert run_cli(command, "--help").returncode == 0, command
