"""The pure pieces behind the RL run and the reliability options (no Ray): gpu_ids mapping,
memory sizes, metrics and pictures, `slurm-rl plot`, requeue requests, external-cluster env."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from slurm_rl.config.spec import parse_spec
from slurm_rl.core.errors import UsageError
from slurm_rl.core.events import read_events
from slurm_rl.core.paths import JobPaths
from slurm_rl.distributed._engine.reliability.health import parse_memory
from slurm_rl.distributed.worker_env.gpu_pinning import pinned_env, resolve
from slurm_rl.driver.metrics import MetricsLog, read_metrics
from slurm_rl.login.cli import cli
from slurm_rl.login.local import EXTERNAL_RAY_ENV, external_ray_env


def test_gpu_ids_are_local_or_numbered_across_the_cluster() -> None:
    assert resolve([[0, 1, 2, 3], [4, 5, 6, 7]], [4, 4], [4, 4]) == [[0, 1, 2, 3], [0, 1, 2, 3]]  # 4-GPU nodes
    assert resolve([[0, 1, 2, 3], [4, 5, 6, 7]], [4, 4], [8, 8]) == [[0, 1, 2, 3], [4, 5, 6, 7]]  # 8-GPU nodes
    assert resolve([2, 0], [2, 2], [4, 4]) == [[2, 0], [2, 0]]  # a flat list: the same devices on every node
    assert resolve("auto", [3], [8]) == [[0, 1, 2]]
    with pytest.raises(ValueError, match="node 1: \\[4, 5\\], but that node has 2 GPU"):
        resolve([[0, 1], [4, 5]], [2, 2], [2, 2])
    with pytest.raises(ValueError, match="'auto': node 0 has 3 bundles but only 2"):
        resolve("auto", [3], [2])
    with pytest.raises(ValueError, match="one list of device ids per node"):
        resolve([[0], [1], [2]], [1, 1], [1, 1])
    assert pinned_env([[3]], 0, 0) == {"CUDA_VISIBLE_DEVICES": "3", "RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES": "1"}


@pytest.mark.parametrize(
    ("text", "size"), [("8GB", 8 * 10**9), ("512MiB", 512 * 2**20), ("1.5G", 1_500_000_000), (4096, 4096)]
)
def test_memory_sizes(text: object, size: int) -> None:
    assert parse_memory(text) == size


@pytest.mark.parametrize("bad", ["", "8 parsecs", "-1GB", 0, True, "GB"])
def test_bad_memory_sizes_name_the_option(bad: object) -> None:
    with pytest.raises(ValueError, match="memory_limit="):
        parse_memory(bad)


def test_metrics_log_and_pictures_and_the_plot_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLURM_RESTART_COUNT", "1")
    log = MetricsLog(tmp_path)
    for step in range(5):
        log.log(step=step, reward=step / 5, step_s=0.1, note="text is not plotted")
    log.event("workers_ready", policy=2)
    (tmp_path / "metrics.jsonl").open("a").write('{"cut by a kill')  # a torn last line is skipped
    rows = read_metrics(JobPaths(tmp_path).metrics)
    assert [r["step"] for r in rows] == [0, 1, 2, 3, 4] and {r["attempt"] for r in rows} == {1}
    assert read_events(tmp_path / "events.jsonl")[0]["event"] == "workers_ready"
    res = CliRunner().invoke(cli, ["plot", str(tmp_path)])
    assert res.exit_code == 0, res.output
    assert res.output.split() == [str(tmp_path / "metrics.png"), str(tmp_path / "timeline.png")]
    assert (tmp_path / "metrics.png").read_bytes()[:4] == b"\x89PNG"
    empty = tmp_path / "empty"
    empty.mkdir()
    res = CliRunner().invoke(cli, ["plot", str(empty)])
    assert res.exit_code == 2 and "nothing to draw yet" in res.output
    res = CliRunner().invoke(cli, ["plot", "no-such-job"])
    assert res.exit_code == 2 and "'no-such-job': not a job id" in res.output


def test_requeue_request_inside_and_outside_a_slurm_job(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    from slurm_rl.core.exits import REQUEUE_RC
    from slurm_rl.driver.preempt import requeue

    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    monkeypatch.setenv("SLURM_RL_JOB_DIR", str(tmp_path))
    with pytest.raises(SystemExit) as stop:
        requeue("local")
    assert stop.value.code == REQUEUE_RC and "not inside a SLURM job" in capsys.readouterr().err
    assert not JobPaths(tmp_path).requeue_request(0).exists()
    monkeypatch.setenv("SLURM_JOB_ID", "42")
    monkeypatch.setenv("SLURM_RESTART_COUNT", "2")
    with pytest.raises(SystemExit):
        requeue("time-limit warning at step 7")
    assert JobPaths(tmp_path).requeue_request(2).read_text() == "time-limit warning at step 7\n"
    assert read_events(tmp_path / "events.jsonl")[-1]["event"] == "requeue_requested"


def test_external_cluster_env(tmp_path: Path) -> None:
    spec = parse_spec(
        {
            "cluster_type": "ray",
            "cluster_name": "x",
            "fileroot": str(tmp_path),
            "ray_head_node_address": "10.0.0.5:6379",
            "ray_auth_token_file": str(tmp_path / "tok"),
        },
        "t",
    )
    with pytest.raises(UsageError, match=r"ray_auth_token_file: .*tok does not exist"):
        external_ray_env(spec, None, {})
    (tmp_path / "tok").write_text("secret")
    env = external_ray_env(spec, None, {})
    assert env[EXTERNAL_RAY_ENV] == env["RAY_ADDRESS"] == "10.0.0.5:6379"
    assert env["RAY_AUTH_MODE"] == "token" and env["RAY_AUTH_TOKEN_PATH"] == str(tmp_path / "tok")
    local = parse_spec({"cluster_type": "local", "cluster_name": "l", "fileroot": str(tmp_path)}, "t")
    assert external_ray_env(local, None, {}) == {}
    assert external_ray_env(local, "h:1", {"RAY_AUTH_TOKEN": "t"})["RAY_AUTH_MODE"] == "token"
    with pytest.raises(UsageError, match="--ray-address 'nohost'"):
        external_ray_env(local, "nohost", {})
    assert "secret" not in json.dumps(env) and os.environ.get(EXTERNAL_RAY_ENV) is None
