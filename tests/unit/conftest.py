"""Fixtures shared by the unit tests of the driver API."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import ray

from slurm_rl.distributed.worker_env.local_start import start_local_ray


@contextlib.contextmanager
def local_ray(**resources: object) -> Iterator[None]:
    """An embedded local Ray with these (logical) resources, no token, no dashboard: started as
    `init_ray` starts a local run's (no dashboard process, a minimal agent, no prestarted workers,
    again where Ray's raylet wait ran out on a busy machine)."""
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    start_local_ray(include_dashboard=False, **resources)
    try:
        yield
    finally:
        ray.shutdown()


@pytest.fixture(scope="module")
def many_gpu_ray() -> Iterator[None]:
    """Room for the documentation's examples as written ([8, 8] GPU bundles and more)."""
    with local_ray(num_cpus=24, num_gpus=24):
        yield


class Laptop:
    """What the ``laptop`` fixture makes: the experiment it submits, and its named clusters."""

    def __init__(self, root: Path) -> None:
        self.root, self.exp = root, root / "exp.py"
        self.exp.write_text("print('hi')\n")

    def add_clusters(self, names: str) -> None:
        """Cluster NAME for each letter, its spec's cluster_name NAME, reached through me@NAME."""
        from click.testing import CliRunner

        from slurm_rl.login.cli import cli

        for name in names:
            spec = self.root / f"{name}.json"
            spec.write_text(json.dumps({"cluster_name": name, "fileroot": str(self.root / name)}))
            added = CliRunner().invoke(cli, ["clusters", "add", name, str(spec), "--login", f"me@{name}"])
            assert added.exit_code == 0, added.output


@pytest.fixture
def laptop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Laptop:
    """A laptop: no SLURM client here (the entry point's forwarder takes commands to login
    nodes), a clusters file of this test's own, no default spec or login host."""
    from slurm_rl.laptop import cli as laptop_cli
    from slurm_rl.login.submission import choose
    from slurm_rl.slurm import runner

    monkeypatch.setenv("SLURM_RL_CLUSTERS", str(tmp_path / "clusters.json"))
    monkeypatch.delenv("CLUSTER_SPEC_PATH", raising=False)
    monkeypatch.delenv("SLURM_RL_LOGIN", raising=False)
    for module in (laptop_cli, choose, runner):
        monkeypatch.setattr(module, "client_installed", lambda: False)  # no sbatch, no squeue
    return Laptop(tmp_path)
