"""Ray's `ray start`, run inside the node bootstrap, minus what a batch job never uses.

Ray's CLI starts a Ray Client server on the head whenever its dependencies are importable, and
offers no flag to turn it off (port 0 is rejected). A slurm-rl driver runs inside the job and
connects to the GCS directly, so the client server is only a process competing for the node's
CPUs during bring-up. Everything else is the unmodified `ray start`.
"""

from __future__ import annotations


def start_in_process(argv: list[str]) -> None:
    """Run `ray start ARGV` in this process; raises on failure instead of exiting."""
    from ray.scripts import scripts

    if not any(a.startswith("--ray-client-server-port") for a in argv):
        scripts.get_ray_client_dependency_error = lambda: "disabled by slurm-rl"
    scripts.start.main(args=argv, prog_name="ray start", standalone_mode=False)

