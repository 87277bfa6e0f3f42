"""A Ray node without the dashboard, started lean: what `ray start` in a job and ``ray.init()``
in a local run both skip while their node starts (``without_dashboard``).

Ray builds a node without the dashboard almost as it builds one with it:
- the head still starts a dashboard process (``dashboard.py``, ~0.6 CPU-s and ~115 MB): with
  the dashboard off it loads only the usage-stats reporter, or, on a job's head, the job and
  state APIs that slurm-rl does not use; here it does not start;
- every node's dashboard agent decides which modules to load by its own import of the
  dashboard's extras, and where ``ray[default]`` is installed it loads all of them (aiohttp,
  OpenTelemetry, the metrics reporter that polls the node for the node's life): here Ray passes
  it ``--minimal`` and the raylet runs it through ``minimal_agent.py``, which loads only what a
  minimal Ray has.
Measured (docs/measurements.md): a job's 3-node trivial job ~1.6 busy CPU-s less; a local run's
``init_ray()`` with one actor 4.2-4.8 -> 3.2-3.3 busy CPU-s, 3.2-4.3 -> 2.3-2.4 s, ~155 MB less.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

MINIMAL_AGENT = Path(__file__).resolve().parent / "minimal_agent.py"
AGENT_FLAG = "--dashboard_agent_command="
NO_DASHBOARD = ImportError("no dashboard on this Ray node (slurm-rl)")


@contextlib.contextmanager
def without_dashboard() -> Iterator[None]:
    """While inside, a Ray node this process starts (``ray.init(address="local")``, `ray start`)
    has no dashboard process and runs its dashboard agent minimal; afterwards Ray is as before
    (a later ``ray.init(include_dashboard=True)`` in the same process gets Ray's own)."""
    import ray._private.node as ray_node
    import ray._private.services as services
    import ray._private.utils as ray_utils

    dependency_error, api_server = ray_utils.get_dashboard_dependency_error, ray_node.Node.start_api_server
    start = services.start_ray_process
    ray_utils.get_dashboard_dependency_error = lambda: NO_DASHBOARD
    ray_node.Node.start_api_server = no_api_server  # type: ignore[assignment]
    services.start_ray_process = with_minimal_agent(start)
    try:
        yield
    finally:
        ray_utils.get_dashboard_dependency_error = dependency_error
        ray_node.Node.start_api_server = api_server  # type: ignore[method-assign]
        services.start_ray_process = start


def with_minimal_agent(start: Any) -> Any:
    """Ray's ``start_ray_process``, but a raylet it starts runs minimal_agent.py in front of Ray's
    ``dashboard/agent.py`` (the rest of the agent's command as Ray built it). Where Ray builds the
    agent command differently, nothing changes."""
    import ray._private.services as services

    from .forking import with_fork_server

    ray_agent = os.path.join(services.RAY_PATH, "dashboard", "agent.py")
    python_scripts = [
        str(MINIMAL_AGENT),
        os.path.join(services.RAY_PATH, "_private", "runtime_env", "agent", "main.py"),
        os.path.join(services.RAY_PATH, "_private", "workers", "default_worker.py"),
    ]

    def start_with_minimal_agent(command: list[str], *args: Any, **kwargs: Any) -> Any:
        command = [c.replace(ray_agent, str(MINIMAL_AGENT), 1) if c.startswith(AGENT_FLAG) else c for c in command]
        command, env = with_fork_server(command, python_scripts)
        if env:
            kwargs["env_updates"] = {**(kwargs.get("env_updates") or {}), **env}
        return start(command, *args, **kwargs)

    return start_with_minimal_agent


def no_api_server(node: object, *, include_dashboard: bool | None, raise_on_failure: bool) -> None:
    """Ray's ``Node.start_api_server``, starting nothing: the node has no dashboard URL."""
    node._webui_url = None  # type: ignore[attr-defined]
