"""MetricsLog feeds TensorBoard (event files its own reader reads back) and, when configured,
Weights & Biases (offline here: no network), one run per job resumed by each attempt."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from slurm_rl.driver.metrics import MetricsLog, scalars, wandb_configured


def test_tensorboard_reads_back_what_was_logged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    monkeypatch.setenv("WANDB_MODE", "disabled")
    log = MetricsLog(tmp_path)
    for step in range(4):
        log.log(step=step, reward=step / 4, loss=torch.tensor(1.0 - step / 8), note="text", done=False)
    log.close()
    events = EventAccumulator(str(tmp_path / "tensorboard"))
    events.Reload()
    assert sorted(events.Tags()["scalars"]) == ["loss", "reward"]  # numbers only
    assert [(e.step, e.value) for e in events.Scalars("reward")] == [(0, 0.0), (1, 0.25), (2, 0.5), (3, 0.75)]
    assert events.Scalars("loss")[3].value == pytest.approx(0.625)
    assert len((tmp_path / "metrics.jsonl").read_text().splitlines()) == 4  # the JSON lines as before


def test_scalars_keep_numbers_only() -> None:
    got = scalars({"step": 3, "a": 1, "b": 0.5, "c": True, "d": "x", "e": torch.tensor(2.0), "f": torch.ones(2)})
    assert got == {"a": 1.0, "b": 0.5, "e": 2.0}


def test_wandb_offline_run_carries_the_job(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    wandb = pytest.importorskip("wandb")
    assert not wandb_configured({})  # installed but not configured: off
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("SLURM_JOB_ID", "4242")
    monkeypatch.setenv("SLURM_JOB_NAME", "grpo")
    monkeypatch.setenv("SLURM_RESTART_COUNT", "2")
    log = MetricsLog(tmp_path, tensorboard=False)
    log.log(step=1, reward=0.5)
    log.log(step=2, reward=0.75)
    log.close()
    # finish() returns before W&B's service has flushed the run's record log (a CI run under load
    # read only its 7-byte header); a driver's exit waits for it in wandb's atexit teardown
    wandb.teardown()
    runs = list((tmp_path / "wandb").glob("offline-run-*-slurm-4242"))
    assert len(runs) == 1, list((tmp_path / "wandb").iterdir())
    record = (runs[0] / "run-slurm-4242.wandb").read_bytes()  # wandb's own record log of the run
    for expected in (b"slurm_job_id", b"4242", b"grpo", b"attempt", b"reward"):
        assert expected in record, expected
