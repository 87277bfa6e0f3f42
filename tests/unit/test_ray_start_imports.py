"""The node bootstrap's `ray start` imports Ray's CLI without the command groups it never uses,
and the process can still import them afterwards."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.unit

PROBE = """
import json, sys, time
from slurm_rl.job.ray_start import _without_cli_groups
t = time.process_time()
with _without_cli_groups():
    from ray.scripts import scripts
took = time.process_time() - t
loaded = [m for m in ("ray.util.state.state_cli", "ray.dashboard.modules.job.cli") if sys.modules.get(m)]
import ray.util.state.state_cli  # afterwards, as usual
print(json.dumps({"commands": sorted(scripts.cli.commands), "loaded": loaded, "cpu_s": took,
                  "later": "ray.util.state.state_cli" in sys.modules}))
"""


def test_ray_start_needs_none_of_the_clis_other_command_groups() -> None:
    res = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    seen = json.loads(res.stdout.splitlines()[-1])
    assert "start" in seen["commands"] and "stop" in seen["commands"], seen
    assert not {"list", "get", "summary", "logs", "job"} & set(seen["commands"]), seen  # skipped by Ray's CLI
    assert seen["loaded"] == [] and seen["later"], seen
