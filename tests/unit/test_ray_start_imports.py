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


AGENT_PROBE = """
import json, os, sys
import ray._private.node as ray_node
import ray._private.services as services
import ray._private.utils as ray_utils
seen = []
services.start_ray_process = lambda command, *a, **k: seen.append(command)
from slurm_rl.distributed.worker_env.lean_node import MINIMAL_AGENT, without_dashboard
ray_agent = os.path.join(services.RAY_PATH, "dashboard", "agent.py")
agent_cmd = f"--dashboard_agent_command=python -u {ray_agent} --minimal"
before = (ray_node.Node.start_api_server, ray_utils.get_dashboard_dependency_error())
with without_dashboard():
    services.start_ray_process(["raylet", agent_cmd, f"--other={ray_agent}"])
    inside = repr(ray_utils.get_dashboard_dependency_error())
services.start_ray_process(["raylet", agent_cmd])
print(json.dumps({"command": seen[0], "after": seen[1], "minimal": str(MINIMAL_AGENT), "inside": inside,
                  "restored": (ray_node.Node.start_api_server, ray_utils.get_dashboard_dependency_error()) == before}))
"""


def test_a_node_without_the_dashboard_runs_rays_agent_through_the_minimal_launcher() -> None:
    """While a node starts without the dashboard, the raylet's agent command names slurm-rl's
    launcher instead of Ray's agent.py (the rest of the command as Ray built it; no other
    argument changes) and Ray is told the dashboard is missing (so it passes ``--minimal``).
    Afterwards the process's Ray is as before: a later node with the dashboard gets Ray's agent."""
    res = subprocess.run([sys.executable, "-c", AGENT_PROBE], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    seen = json.loads(res.stdout.splitlines()[-1])
    agent_cmd, other = seen["command"][1], seen["command"][2]
    assert agent_cmd == f"--dashboard_agent_command=python -u {seen['minimal']} --minimal", seen
    assert other.endswith("dashboard/agent.py"), seen
    assert "no dashboard" in seen["inside"], seen
    assert seen["after"][1].endswith("dashboard/agent.py --minimal") and seen["restored"], seen


MODULES_PROBE = """
import json, sys
from slurm_rl.distributed.worker_env.minimal_agent import block_dashboard_extras
block_dashboard_extras()
import ray.dashboard.agent
import ray.dashboard.utils as du
mods = du.get_all_modules(du.DashboardAgentModule)
heavy = [m for m in ("aiohttp", "opentelemetry") if sys.modules.get(m)]
print(json.dumps({"modules": [m.__name__ for m in mods], "heavy": heavy}))
"""


def test_the_launcher_hands_over_to_rays_agent_which_loads_no_dashboard_extras() -> None:
    """Run as the raylet runs it (here with ``--help``), the launcher reaches Ray's own agent
    script. With the extras of ``ray[default]`` unimportable, as on `pip install ray`, the agent's
    module search imports none of them (aiohttp, OpenTelemetry) and loads no dashboard module."""
    from slurm_rl.distributed.worker_env.lean_node import MINIMAL_AGENT

    res = subprocess.run([sys.executable, str(MINIMAL_AGENT), "--help"], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0 and "--minimal" in res.stdout and "--node-id" in res.stdout, res.stdout + res.stderr
    res = subprocess.run([sys.executable, "-c", MODULES_PROBE], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    assert json.loads(res.stdout.splitlines()[-1]) == {"modules": [], "heavy": []}, res.stdout
