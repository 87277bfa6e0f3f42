"""on_preempt: the callback runs on SIGUSR2, and at once when the warning came earlier."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import slurm_rl
from slurm_rl.core.events import read_events


def test_callback_on_signal(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("SLURM_RL_JOB_DIR", str(tmp_path))
    (tmp_path / "nodes").mkdir()
    calls: list[int] = []
    old = signal.getsignal(signal.SIGUSR2)
    try:
        slurm_rl.on_preempt(lambda: calls.append(1))
        assert calls == []
        os.kill(os.getpid(), signal.SIGUSR2)
        assert calls == [1]
        assert [e["event"] for e in read_events(tmp_path / "events.jsonl")] == ["preempt_signal"]
    finally:
        signal.signal(signal.SIGUSR2, old)


def test_warning_before_registration_fires_at_once(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("SLURM_RL_JOB_DIR", str(tmp_path))
    monkeypatch.setenv("SLURM_RESTART_COUNT", "1")
    (tmp_path / "nodes").mkdir()
    (tmp_path / "nodes" / "warned-0").touch()  # an earlier attempt's warning does not count
    calls: list[int] = []
    old = signal.getsignal(signal.SIGUSR2)
    try:
        slurm_rl.on_preempt(lambda: calls.append(1))
        assert calls == []
        (tmp_path / "nodes" / "warned-1").touch()
        slurm_rl.on_preempt(lambda: calls.append(2))
        assert calls == [2]
    finally:
        signal.signal(signal.SIGUSR2, old)
