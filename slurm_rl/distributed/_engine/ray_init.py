"""init_ray: attach to this job's Ray cluster, or start (or reuse) a local one.

Also importable from ``slurm_rl.distributed.virtual_cluster``, where NeMo RL users look for it.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Mapping

from ...core.job_env import RAY_ADDRESS_ENV, JobEnvironment, Settings
from ...core.stacks import arm
from ..worker_env.hygiene import SETUP_HOOK_NAME, setup_hook, worker_env_vars
from ..worker_env.local_start import start_local_ray
from ..worker_env.setup_worker import use_light_setup_worker

logger = logging.getLogger(__name__)

SLURM_MANAGED_RESOURCE = "slurm_managed_ray_cluster"
# Ray's INFO lines ("Connecting to existing Ray cluster at ...") open every driver log; its
# warnings and errors still show. init_ray's own INFO lines are on the "slurm_rl" logger.
RAY_LOG_LEVEL = logging.WARNING
LOCAL_TAG_PREFIX = "nrl"  # NeMo RL's: either tool reuses a local cluster the other started
EXCLUDES_ENV = "NRL_RAY_RUNTIME_ENV_EXCLUDES"  # NeMo RL's: comma-separated runtime_env excludes

# What init_ray found (its return value; NeMo RL 2026's names for the three it knows)
RAY_CLUSTER_EXTERNAL = "external"  # a cluster somebody else started (no nrl_tag_ resource), or --ray-address
RAY_CLUSTER_SLURM_MANAGED = "slurm_managed"  # this slurm-rl job's cluster
RAY_CLUSTER_REUSED_LOCAL = "local_reused"  # a local cluster started earlier for the same devices
RAY_CLUSTER_STARTED_LOCAL = "local_new"  # a local cluster started now


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


def _auto_address_state() -> str:
    """What ``address="auto"`` leads to, decided in one quick GCS call: "none" (no address: Ray
    says so at once), "usable", or "unusable" (gone, or another user's cluster that rejects us:
    Ray's own connect would retry for ~20 s before failing)."""
    try:
        from ray._private.services import canonicalize_bootstrap_address

        address = canonicalize_bootstrap_address("auto")
    except Exception:  # noqa: BLE001 - no running cluster recorded anywhere
        return "none"
    if not address:
        return "none"
    try:
        import socket

        from ray._raylet import GcsClient  # type: ignore[attr-defined]

        host, _, port = address.rpartition(":")
        with socket.create_connection((host, int(port)), timeout=1):
            pass  # nothing listens: gone (GcsClient would retry for a long while)
        GcsClient(address=address).internal_kv_get(b"session_name", b"session", timeout=2)
        return "usable"
    except Exception:  # noqa: BLE001 - any failure means: not usable, start our own
        return "unusable"


def ray_runtime_env_excludes(environ: Mapping[str, str] | None = None) -> list[str]:
    """The runtime_env ``excludes`` named in ``NRL_RAY_RUNTIME_ENV_EXCLUDES`` (comma-separated
    globs, blanks dropped): files Ray must not package with the job's code."""
    env = os.environ if environ is None else environ
    return [p.strip() for p in env.get(EXCLUDES_ENV, "").split(",") if p.strip()]


def _driver_env_vars() -> dict[str, str]:
    """The driver's environment for every worker (launcher variables left out). Classes that
    ``trust_remote_code`` loaded from ``HF_MODULES_CACHE`` must unpickle in workers: that
    directory goes first on their PYTHONPATH."""
    env = worker_env_vars()
    hf_modules = env.get("HF_MODULES_CACHE")
    if hf_modules:
        paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
        env["PYTHONPATH"] = os.pathsep.join([hf_modules, *(p for p in paths if p != hf_modules)])
    return env


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


def _init_ray(log_dir: str | None = None) -> str:
    """Attach to the right Ray cluster or start a local one; returns which (``RAY_CLUSTER_*``).

    0. ``SLURM_RL_EXTERNAL_RAY`` (set by ``slurm-rl run --ray-address``): that cluster;
       a ``ray://`` RAY_ADDRESS (Ray Client, e.g. ``slurm-rl attach JOB --client``): that one;
    1. a cluster carrying ``slurm_managed_ray_cluster`` (a slurm-rl job): reuse it, once the
       job's nodes (or ``--min-nodes``) joined;
    2. a local cluster carrying this process's tag (``nrl_tag_<devices>``): reuse it;
    3. a cluster without any ``nrl_tag_`` (somebody else's: ``ray start``, KubeRay): use it
       (never under ``slurm-rl run``, whose driver gets the run's own local Ray);
    4. otherwise (nothing, another device set's local cluster, a cluster that does not answer
       or rejects us) start a fresh local cluster tagged with this process's tag.
    """
    import ray

    temp_dir = {"_temp_dir": _checked_log_dir(log_dir)} if log_dir else {}  # refused before anything starts
    excludes = ray_runtime_env_excludes()

    def runtime_env(off_nodes: bool = False) -> dict[str, object]:
        """Fresh for every ray.init (Ray rewrites the dict it is given): the user's environment
        minus launcher variables, and a hook that removes those inherited from the raylet. A
        driver off the job's nodes (Ray Client) sends no env_vars (its machine's environment is
        not the nodes'), and the hook by name: Ray Client pickles the job config plainly, and
        the nodes have slurm_rl."""
        if off_nodes:
            env: dict[str, object] = {"worker_process_setup_hook": SETUP_HOOK_NAME}
        else:
            env = {"env_vars": _driver_env_vars(), "worker_process_setup_hook": setup_hook()}
        if excludes:
            env["excludes"] = list(excludes)
        return env

    tag = local_tag()
    job = JobEnvironment.current()
    external = job.external_ray
    if external:  # `slurm-rl run --ray-address`, or a spec with cluster_type "ray": that cluster, no other
        _connect_external(external, runtime_env())
        resources = ray.cluster_resources()
        logger.info("init_ray: connected to the existing Ray cluster at %s (%s)", external, resources)
        _record_connected(resources)
        return RAY_CLUSTER_EXTERNAL
    client = os.environ.get(RAY_ADDRESS_ENV, "")
    if client.startswith("ray://") and not job.in_local_run:  # Ray Client (`slurm-rl attach JOB --client`)
        _connect_external(client, runtime_env(off_nodes=True))
        resources = ray.cluster_resources()
        logger.info("init_ray: connected through Ray Client at %s (%s)", client, resources)
        return RAY_CLUSTER_SLURM_MANAGED if SLURM_MANAGED_RESOURCE in resources else RAY_CLUSTER_EXTERNAL
    try:
        if job.in_local_run:  # `slurm-rl run` promises its own Ray, stopped at its end
            raise ConnectionError("`slurm-rl run` starts its own local Ray")
        if _auto_address_state() == "unusable":
            raise ConnectionError("the running Ray cluster does not answer or rejects this driver")
        ray.init(address="auto", log_to_driver=True, runtime_env=runtime_env(), logging_level=RAY_LOG_LEVEL)
        resources = ray.cluster_resources()
        if SLURM_MANAGED_RESOURCE in resources:
            _check_same_job(resources)
            resources = _wait_for_job_nodes(resources)
            logger.info("init_ray: connected to a SLURM-managed Ray cluster (%s)", resources)
            _record_connected(resources)
            return RAY_CLUSTER_SLURM_MANAGED
        if tag in resources:
            logger.info("init_ray: reusing the local Ray cluster tagged %s", tag)
            return RAY_CLUSTER_REUSED_LOCAL
        theirs = [k for k in resources if k.startswith(f"{LOCAL_TAG_PREFIX}_tag_")]
        if not theirs:
            logger.info("init_ray: connected to an existing Ray cluster started outside slurm-rl (%s)", resources)
            return RAY_CLUSTER_EXTERNAL
        logger.info("init_ray: the running local Ray cluster is tagged %s, not %s; starting a new one", theirs[0], tag)
        ray.shutdown()
    except ConnectionError as exc:  # nothing was connected: nothing to shut down (NeMo RL's tests
        # call init_ray with ray.init mocked while their own Ray runs)
        logger.info("init_ray: no usable running Ray cluster (%s)", exc)
    use_light_setup_worker()
    start_local_ray(  # no dashboard process, a minimal agent, again where Ray's raylet wait ran out
        address="local",
        log_to_driver=True,
        include_dashboard=False,
        logging_level=RAY_LOG_LEVEL,
        runtime_env=runtime_env(),
        resources={tag: 1},
        **temp_dir,
    )
    logger.info("init_ray: started a local Ray cluster tagged %s", tag)
    return RAY_CLUSTER_STARTED_LOCAL


def init_ray(log_dir: str | None = None) -> str:
    """NeMo RL's ``init_ray``: see ``_init_ray``; returns what it found (``RAY_CLUSTER_*``). On
    a job's node it also arms the driver's stack dump (``slurm-rl stacks``, stall reports)."""
    arm(Settings.current().stacks_dir, "driver")
    return _init_ray(log_dir)
