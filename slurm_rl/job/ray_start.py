"""Ray's `ray start`, run inside the node bootstrap, minus what a batch job never uses.

Ray's CLI starts a Ray Client server on the head whenever its dependencies are importable, and
offers no flag to turn it off (port 0 is rejected). A slurm-rl driver runs inside the job and
connects to the GCS directly, so the client server is only a process competing for the node's
CPUs during bring-up. Everything else is the unmodified `ray start`.
"""

from __future__ import annotations

# Ray's GCS declares a node dead after `failure_threshold` failed health checks `period_ms` apart
# (defaults 5 x 3 s, each waiting up to 10 s). A job's nodes sit on one fast network: 5 x 2 s,
# 2 s each, so a lost node's actors fail their callers within about NODE_LOST_WINDOW_S.
HEALTH_CHECK_ENV = {
    "RAY_health_check_period_ms": "2000",
    "RAY_health_check_timeout_ms": "2000",
    "RAY_health_check_failure_threshold": "5",
}
NODE_LOST_WINDOW_S = 20


def start_in_process(argv: list[str]) -> None:
    """Run `ray start ARGV` in this process; raises on failure instead of exiting."""
    from ray.scripts import scripts

    if not any(a.startswith("--ray-client-server-port") for a in argv):
        scripts.get_ray_client_dependency_error = lambda: "disabled by slurm-rl"  # type: ignore[assignment,return-value]
    scripts.start.main(args=argv, prog_name="ray start", standalone_mode=False)
