"""A local Ray whose raylet missed Ray's fixed 30 s startup wait (a busy machine) is started
again, with what the failed start left ended; any other error is Ray's, at once."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import psutil
import pytest
import ray

from slurm_rl.distributed.worker_env import local_start

pytestmark = pytest.mark.unit

RAY_TIMEOUT = Exception(
    "The current node timed out during startup. This could happen because some of the raylet "
    "failed to startup or the GCS has become overloaded."
)


def test_a_start_that_timed_out_is_ended_and_made_again(monkeypatch: pytest.MonkeyPatch, caplog: Any) -> None:
    calls: list[dict[str, Any]] = []
    left: list[subprocess.Popen[bytes]] = []

    def init(**kwargs: Any) -> None:  # Ray's: the first start's raylet never registers
        calls.append(kwargs)
        if len(calls) == 1:
            left.append(subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"]))
            raise RAY_TIMEOUT

    monkeypatch.setattr(ray, "init", init)
    monkeypatch.setattr(ray, "shutdown", lambda: None)
    local_start.start_local_ray(num_cpus=2, _system_config={"x": 1})
    assert len(calls) == 2
    assert calls[1] == {"num_cpus": 2, "_system_config": {"prestart_worker_first_driver": False, "x": 1}}
    assert not psutil.pid_exists(left[0].pid)  # the failed start's process, ended (and reaped) before the second
    assert "missed Ray's 30 s startup wait (start 1 of 3; a busy machine?): ended the 1 processes" in caplog.text


def test_any_other_error_and_the_last_timeout_are_rays(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []

    def init(**kwargs: Any) -> None:
        calls.append(1)
        raise RAY_TIMEOUT if kwargs.get("num_cpus") else ValueError("bad resources")

    monkeypatch.setattr(ray, "init", init)
    monkeypatch.setattr(ray, "shutdown", lambda: None)
    with pytest.raises(ValueError, match="bad resources"):
        local_start.start_local_ray()
    assert calls == [1]
    with pytest.raises(Exception, match="timed out during startup"):
        local_start.start_local_ray(num_cpus=1)
    assert len(calls) == 1 + local_start.ATTEMPTS
    assert not [p for p in psutil.Process().children() if "sleep(300)" in " ".join(p.cmdline())]
