"""init_ray: attach to this job's Ray cluster, or start (or reuse) a local one.

Also importable from ``slurm_rl.distributed.virtual_cluster``, where NeMo RL users look for it.
"""

from __future__ import annotations

import logging
import os
import sys
import time

from ...core.job_env import JobEnvironment
from ..worker_env.hygiene import setup_hook, worker_env_vars

logger = logging.getLogger(__name__)

SLURM_MANAGED_RESOURCE = "slurm_managed_ray_cluster"
# Ray's INFO lines ("Connecting to existing Ray cluster at ...") open every driver log; its
# warnings and errors still show. init_ray's own INFO lines are on the "slurm_rl" logger.
RAY_LOG_LEVEL = logging.WARNING
LOCAL_TAG_PREFIX = "nrl"  # NeMo RL's: either tool reuses a local cluster the other started


class PY_EXECUTABLES:
    """Python environments for workers. SYSTEM is this interpreter; the others are command
    prefixes (``uv run ...``): a py_executable starting with ``uv`` gets a venv per node."""

    SYSTEM = sys.executable
    BASE = "uv run --locked"
    # NeMo RL 2026's names: each an extra of the driver's own uv project (pyproject.toml
    # [project.optional-dependencies]); a worker class registered with one gets that venv per node
    VLLM = "uv run --locked --extra vllm"
    FSDP = "uv run --locked --extra fsdp"
    AUTOMODEL = "uv run --locked --extra automodel"
    MCORE = "uv run --locked --extra mcore"
    NEMO_GYM = "uv run --locked --extra nemo_gym"
    SGLANG = "uv run --locked --extra sglang"
    TRTLLM = "uv run --locked --extra trtllm"


def local_tag(environ: dict[str, str] | None = None) -> str:
    """``nrl_tag_<sorted CUDA_VISIBLE_DEVICES joined by _>``, or ``nrl_tag_ALL`` when unset."""
    env = os.environ if environ is None else environ
    cvd = env.get("CUDA_VISIBLE_DEVICES")
    if cvd is None:
        return f"{LOCAL_TAG_PREFIX}_tag_ALL"
    devices = sorted(d.strip() for d in cvd.split(",") if d.strip())
    return f"{LOCAL_TAG_PREFIX}_tag_{'_'.join(devices)}"


def _record_connected(resources: dict[str, float]) -> None:
    """In a slurm-rl job, add `driver_connected` to events.jsonl (bring-up is measured from it)."""
    job_dir = JobEnvironment.current().job_dir
    if job_dir:
        from ...core.events import append_event
        from ...core.paths import JobPaths

        append_event(JobPaths(job_dir).events, "driver_connected", nodes=int(resources.get(SLURM_MANAGED_RESOURCE, 0)))


def _auto_address_usable() -> bool:
    """Whether ``address="auto"`` leads to a cluster we can talk to, decided in one quick GCS
    call: Ray's own connect retries for ~20 s on a cluster that rejects us (e.g. another
    user's, with token auth) or is gone."""
    try:
        import socket

        from ray._private.services import canonicalize_bootstrap_address
        from ray._raylet import GcsClient  # type: ignore[attr-defined]

        address = canonicalize_bootstrap_address("auto")
        if not address:
            return False
        host, _, port = address.rpartition(":")
        with socket.create_connection((host, int(port)), timeout=1):
            pass  # nothing listens: gone (GcsClient would retry for a long while)
        GcsClient(address=address).internal_kv_get(b"session_name", b"session", timeout=2)
        return True
    except Exception:  # noqa: BLE001 - any failure means: not usable, start our own
        return False


# Ray puts Unix sockets at <temp dir>/session_<date>_<time>_<us>_<pid>/sockets/plasma_store.
_SOCKET_SUFFIX_LEN = len("/session_2026-11-22_11-53-41_678342_4194304/sockets/plasma_store")
_UNIX_PATH_MAX = 107


def _checked_log_dir(log_dir: str) -> str:
    path = os.path.abspath(log_dir)
    if len(path) + _SOCKET_SUFFIX_LEN > _UNIX_PATH_MAX:
        raise ValueError(
            f"init_ray(log_dir={path!r}): too long for Ray's Unix sockets (at most "
            f"{_UNIX_PATH_MAX - _SOCKET_SUFFIX_LEN} characters); use a shorter path, e.g. under /tmp"
        )
    return path


class ForeignClusterError(RuntimeError):
    """Inside a SLURM job, RAY_ADDRESS led to the Ray cluster of another job."""


def _check_same_job(resources: dict[str, float]) -> None:
    """A driver inside SLURM job J must use J's cluster, never one a stale RAY_ADDRESS names."""
    import ray

    env = JobEnvironment.current()
    mine = env.array_task or env.job_id  # a sweep's task: 1234_5 (its cluster also names its own SLURM id)
    theirs = sorted(k.removeprefix("slurm_job_") for k in resources if k.startswith("slurm_job_"))
    if mine and theirs and not {mine, env.job_id} & set(theirs):
        ray.shutdown()
        raise ForeignClusterError(
            f"init_ray: the Ray cluster at {os.environ.get('RAY_ADDRESS', 'auto')} belongs to SLURM job "
            f"{', '.join(theirs)}, but this is job {mine}; unset RAY_ADDRESS (slurm-rl sets it for the job's own "
            f"driver) or run the driver inside that job (`slurm-rl attach {theirs[0]}`)"
        )


def _wait_for_job_nodes(resources: dict[str, float]) -> dict[str, float]:
    """The driver starts as soon as the head is up; the job's other nodes join meanwhile. Wait
    (bounded by the job's ready timeout) until the nodes it needs (--min-nodes, else all) are."""
    import ray

    job_dir = JobEnvironment.current().job_dir
    if not job_dir:
        return resources
    from ...core.errors import JobError
    from ...core.manifest import load_manifest
    from ...core.paths import JobPaths

    try:
        manifest = load_manifest(JobPaths(job_dir).manifest)
    except JobError:
        return resources
    need = manifest.min_nodes or manifest.total_nodes
    end = time.monotonic() + manifest.ready_timeout_s
    while resources.get(SLURM_MANAGED_RESOURCE, 0) < need:
        if time.monotonic() > end:
            raise RuntimeError(
                f"init_ray: {int(resources.get(SLURM_MANAGED_RESOURCE, 0))} of {need} nodes of this "
                f"job joined within {manifest.ready_timeout_s:g} s; see `slurm-rl status` and the node logs"
            )
        time.sleep(0.1)
        resources = ray.cluster_resources()
    return resources


def _connect_external(address: str, runtime_env: dict[str, object]) -> None:
    """ray.init on an existing cluster, with the two ways it goes wrong said plainly."""
    import socket

    import ray

    if not address.startswith("ray://"):
        host, _, port = address.rpartition(":")
        try:
            with socket.create_connection((host, int(port)), timeout=5):
                pass
        except OSError as exc:
            raise ConnectionError(
                f"init_ray: nothing answers at {address} ({exc}); is the Ray head up, and is "
                f"HOST:PORT its GCS address (what `ray start --head` printed)?"
            ) from None
    try:
        ray.init(address=address, log_to_driver=True, runtime_env=runtime_env, logging_level=RAY_LOG_LEVEL)
    except ConnectionError as exc:
        raise ConnectionError(
            f"init_ray: could not attach to the Ray cluster at {address}: {exc}. A Ray driver runs on a node of "
            f"the cluster (it attaches through that node's raylet): run it on the head node, or use a "
            f"ray://HOST:10001 (Ray Client) address; with token auth, set RAY_AUTH_TOKEN(_PATH) or the spec's "
            f"ray_auth_token_file"
        ) from exc


def init_ray(log_dir: str | None = None) -> str:
    """Attach to the right Ray cluster or start a local one; returns which branch was taken.

    0. ``SLURM_RL_EXTERNAL_RAY`` (set by ``slurm-rl run --ray-address``): that cluster;
    1. a cluster carrying ``slurm_managed_ray_cluster`` (a slurm-rl job): reuse it;
    2. a local cluster carrying this process's tag: reuse it;
    3. otherwise start a fresh local cluster tagged with this process's tag.
    """
    import ray

    def runtime_env() -> dict[str, object]:
        """Fresh for every ray.init (Ray rewrites the dict it is given): the user's environment
        minus launcher variables, and a hook that removes those inherited from the raylet."""
        return {"env_vars": worker_env_vars(), "worker_process_setup_hook": setup_hook()}

    tag = local_tag()
    external = JobEnvironment.current().external_ray
    if external:  # `slurm-rl run --ray-address`, or a spec with cluster_type "ray": that cluster, no other
        _connect_external(external, runtime_env())
        resources = ray.cluster_resources()
        logger.info("init_ray: connected to the existing Ray cluster at %s (%s)", external, resources)
        _record_connected(resources)
        return "external"
    try:
        if not _auto_address_usable():
            raise ConnectionError("no usable running Ray cluster")
        ray.init(address="auto", log_to_driver=True, runtime_env=runtime_env(), logging_level=RAY_LOG_LEVEL)
        resources = ray.cluster_resources()
        if SLURM_MANAGED_RESOURCE in resources:
            _check_same_job(resources)
            resources = _wait_for_job_nodes(resources)
            logger.info("init_ray: connected to a SLURM-managed Ray cluster (%s)", resources)
            _record_connected(resources)
            return "slurm_managed"
        if tag in resources:
            logger.info("init_ray: reusing the local Ray cluster tagged %s", tag)
            return "local_reused"
        logger.info("init_ray: the running Ray cluster is neither SLURM-managed nor tagged %s; starting a new one", tag)
        ray.shutdown()
    except ConnectionError:
        logger.info("init_ray: no running Ray cluster found")
    kwargs = {"_temp_dir": _checked_log_dir(log_dir)} if log_dir else {}
    ray.init(
        address="local",
        log_to_driver=True,
        include_dashboard=False,
        logging_level=RAY_LOG_LEVEL,
        runtime_env=runtime_env(),
        resources={tag: 1},
        **kwargs,  # type: ignore[arg-type]
    )
    logger.info("init_ray: started a local Ray cluster tagged %s", tag)
    return "local_new"
