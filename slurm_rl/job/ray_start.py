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


# Ray's defaults: 30% of the node's available memory, at most 200 GB, at least 75 MiB.
OBJECT_STORE_PROPORTION = 0.3
OBJECT_STORE_MAX = 200 * 10**9
OBJECT_STORE_MIN = 75 * 2**20


def object_store_size(available_memory: int, shm_free: int) -> tuple[int, str | None]:
    """(bytes for --object-store-memory, a warning or None). Ray's own default, but never more
    than 95% of the free ``/dev/shm``: where /dev/shm is small (containers, where the runtime
    sets it), Ray would otherwise put the store in its temp dir on disk, or fail to allocate."""
    default = min(int(available_memory * OBJECT_STORE_PROPORTION), OBJECT_STORE_MAX)
    fits = int(shm_free * 0.95)
    if fits >= default:
        return max(default, OBJECT_STORE_MIN), None
    size = max(fits, OBJECT_STORE_MIN)
    mib = 2**20
    return size, (
        f"/dev/shm has {shm_free // mib} MiB free, less than the {default // mib} MiB object store Ray would use: "
        f"the object store is {size // mib} MiB (objects beyond it spill to disk); ask for a larger /dev/shm "
        f"(e.g. a site's enroot/apptainer shm setting) if the job moves large tensors through Ray"
    )
