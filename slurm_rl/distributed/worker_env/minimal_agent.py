"""Ray's dashboard agent, run as on a `pip install ray` without the dashboard's extras.

The raylet of a Ray node without the dashboard (a job's, a local run's) runs this script instead
of Ray's ``dashboard/agent.py`` (lean_node.py rewrites its agent command). Ray passes
``--minimal`` to such an agent, but the agent then decides which of its modules to load by
importing ``ray.dashboard.optional_deps``
itself: where ``ray[default]`` is installed that succeeds, and it imports every module (aiohttp,
OpenTelemetry, the state aggregator, ...) and runs all of them, the metrics reporter that polls
the node included, for a dashboard the job does not have. Here the packages that ``ray[default]``
adds to ``pip install ray`` cannot be imported (grpcio aside: the agent serves gRPC either way),
as on a minimal install, so the agent loads only what a minimal Ray has; then Ray's own script
runs unchanged, as ``__main__``. Measured: 0.87 -> 0.58 CPU-s to load the agent's modules, and
with nothing left running (Ray 2.60, the lab).

A script, not a slurm_rl module: it runs in the agent's fresh interpreter and imports only the
standard library before handing over to Ray.
"""

import importlib.util
import runpy
import sys
from pathlib import Path

# what ray[default] adds to `pip install ray` (Ray's package metadata), grpcio and tools aside
DASHBOARD_EXTRAS = (
    "ray.dashboard.optional_deps",  # the agent's own test for them
    "aiohttp",
    "aiohttp_cors",
    "colorful",
    "opencensus",
    "opentelemetry",
    "prometheus_client",
    "pydantic",
    "smart_open",
)


def block_dashboard_extras() -> None:
    """From now on, importing any of DASHBOARD_EXTRAS in this interpreter fails (a None in
    sys.modules makes ``import X`` raise ModuleNotFoundError), as where they are not installed."""
    for name in DASHBOARD_EXTRAS:
        sys.modules[name] = None  # type: ignore[assignment]


def main() -> None:
    spec = importlib.util.find_spec("ray")
    if spec is None or spec.origin is None:
        raise SystemExit("slurm-rl minimal_agent: cannot find Ray in this interpreter")
    agent = Path(spec.origin).parent / "dashboard" / "agent.py"
    block_dashboard_extras()
    sys.argv[0] = str(agent)
    sys.path[0] = str(agent.parent)  # as when Python runs Ray's script itself
    runpy.run_path(str(agent), run_name="__main__")


if __name__ == "__main__":
    main()
