"""init_ray: attach to this job's Ray cluster, or start a local one (see ../shared/API.md)."""

from __future__ import annotations

import logging
import os
import sys
import time
from pathlib import Path
from typing import Any, TypedDict

logger = logging.getLogger(__name__)

SLURM_MANAGED_RESOURCE = "slurm_managed_ray_cluster"
LOCAL_TAG_PREFIX = "srl"
# Launcher variables that break Ray workers (they would think they are MPI/SLURM ranks).
_LAUNCHER_PREFIXES = ("SLURM_", "PMI_", "PMIX_", "OMPI_", "MPI_")


class PY_EXECUTABLES:  # noqa: N801 - the contract's name
    """Python environments for workers. SYSTEM is this interpreter; the others are command
    prefixes (``uv run ...``): a py_executable starting with ``uv`` gets a venv per node."""

    SYSTEM = sys.executable
    BASE = "uv run --locked"


def worker_env_vars(environ: dict[str, str] | None = None) -> dict[str, str]:
    """The user's environment for workers, minus launcher variables."""
    env = os.environ if environ is None else environ
    return {k: v for k, v in env.items() if not k.startswith(_LAUNCHER_PREFIXES)}


def local_tag(environ: dict[str, str] | None = None) -> str:
    """``srl_tag_<sorted CUDA_VISIBLE_DEVICES>``, or ``srl_tag_ALL`` when unset."""
    env = os.environ if environ is None else environ
    cvd = env.get("CUDA_VISIBLE_DEVICES")
    if cvd is None:
        return f"{LOCAL_TAG_PREFIX}_tag_ALL"
    devices = sorted(d.strip() for d in cvd.split(",") if d.strip())
    return f"{LOCAL_TAG_PREFIX}_tag_{'_'.join(devices)}"


def _record_connected(resources: dict[str, float]) -> None:
    """In a slurm-rl job, add `driver_connected` to events.jsonl (bring-up is measured from it)."""
    job_dir = os.environ.get("SLURM_RL_JOB_DIR")
    if job_dir:
        from ..events import append_event

        append_event(Path(job_dir) / "events.jsonl", "driver_connected",
                     nodes=int(resources.get(SLURM_MANAGED_RESOURCE, 0)))


def _auto_address_usable() -> bool:
    """Whether ``address="auto"`` leads to a cluster we can talk to, decided in one quick GCS
    call: Ray's own connect retries for ~20 s on a cluster that rejects us (e.g. another
    user's, with token auth) or is gone."""
    try:
        from ray._private.services import canonicalize_bootstrap_address
        from ray._raylet import GcsClient

        import socket

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
        raise ValueError(f"init_ray(log_dir={path!r}): too long for Ray's Unix sockets (at most "
                         f"{_UNIX_PATH_MAX - _SOCKET_SUFFIX_LEN} characters); use a shorter path, e.g. under /tmp")
    return path


def init_ray(log_dir: str | None = None) -> str:
    """Attach to the right Ray cluster or start a local one; returns which branch was taken.

    1. a cluster carrying ``slurm_managed_ray_cluster`` (a slurm-rl job): reuse it;
    2. a local cluster carrying this process's tag: reuse it;
    3. otherwise start a fresh local cluster tagged with this process's tag.
    """
    import ray

    runtime_env = {"env_vars": worker_env_vars()}
    tag = local_tag()
    try:
        if not _auto_address_usable():
            raise ConnectionError("no usable running Ray cluster")
        ray.init(address="auto", log_to_driver=True, runtime_env=runtime_env)
        resources = ray.cluster_resources()
        if SLURM_MANAGED_RESOURCE in resources:
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
    ray.init(address="local", log_to_driver=True, include_dashboard=False, runtime_env=runtime_env,
             resources={tag: 1}, **kwargs)
    logger.info("init_ray: started a local Ray cluster tagged %s", tag)
    return "local_new"


class ClusterConfig(TypedDict):
    gpus_per_node: int
    num_nodes: int


class ResourceInsufficientError(Exception):
    """The Ray cluster has fewer CPUs/GPUs than the virtual cluster asks for."""


MAX_RETRIES_ENV = "NRL_VIRTUAL_CLUSTER_MAX_RETRIES"
MAX_RETRIES_ENV_TWIN = "SLURM_RL_VIRTUAL_CLUSTER_MAX_RETRIES"
PLACEMENT_GROUP_TIMEOUT_S = 180.0


def _max_retries() -> int:
    raw = os.environ.get(MAX_RETRIES_ENV, os.environ.get(MAX_RETRIES_ENV_TWIN, "6"))
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"{MAX_RETRIES_ENV}={raw!r}: must be an integer") from None
    assert value > 0, f"{MAX_RETRIES_ENV}={value}: must be > 0"
    return value


def _get_node_ip_and_free_port_impl() -> tuple[str, int]:
    import socket

    import ray

    ip = ray.util.get_node_ip_address()
    if ip.startswith("0."):
        ip = socket.gethostbyname(socket.gethostname())
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("", 0))
        port = s.getsockname()[1]
    return ip, port


def _remote_port_probe() -> Any:
    import ray

    return ray.remote(num_cpus=0)(_get_node_ip_and_free_port_impl)


class _LazyRemote:
    """``_get_node_ip_and_free_port`` as a Ray remote function, created on first use (importing
    this module must not need a running Ray). Tests patch it by this name."""

    def __init__(self) -> None:
        self._fn: Any = None

    def options(self, **kw: Any) -> Any:
        if self._fn is None:
            self._fn = _remote_port_probe()
        return self._fn.options(**kw)

    def remote(self, *a: Any, **kw: Any) -> Any:
        return self.options().remote(*a, **kw)


_get_node_ip_and_free_port = _LazyRemote()


class RayVirtualCluster:
    """One Ray placement group per logical node; ``[4, 8, 2]`` is three nodes."""

    def __init__(self, bundle_ct_per_node_list: list[int], use_gpus: bool = True,
                 max_colocated_worker_groups: int = 1, num_gpus_per_node: int = 8, name: str = "",
                 placement_group_strategy: str = "STRICT_PACK") -> None:
        if not bundle_ct_per_node_list or any(not isinstance(n, int) or n < 0 for n in bundle_ct_per_node_list):
            raise ValueError(f"bundle_ct_per_node_list must be a non-empty list of ints >= 0, got {bundle_ct_per_node_list!r}")
        if max_colocated_worker_groups < 1:
            raise ValueError(f"max_colocated_worker_groups must be >= 1, got {max_colocated_worker_groups}")
        self._bundle_ct_per_node_list = list(bundle_ct_per_node_list)
        self.use_gpus = use_gpus
        self.max_colocated_worker_groups = max_colocated_worker_groups
        self.num_gpus_per_node = num_gpus_per_node
        self.name = name
        self.placement_group_strategy = placement_group_strategy
        self._node_placement_groups: list[Any] | None = None
        self._next_probe: Any = None
        self._shut_down = False
        retries = _max_retries()
        last = ""
        for attempt in range(retries):
            try:
                self._node_placement_groups = self._init_placement_groups(placement_group_strategy)
                if self.get_placement_groups():
                    self._next_probe = self._probe()  # ready by the time a worker group asks
                return
            except ResourceInsufficientError as exc:
                last = str(exc)
                logger.warning("RayVirtualCluster: %s (attempt %d of %d)", exc, attempt + 1, retries)
                if attempt < retries - 1:
                    time.sleep(2**attempt)
        raise ResourceInsufficientError(
            f"Maximum number of retries ({retries}) reached: the Ray cluster still lacks resources for "
            f"{self._bundle_ct_per_node_list} bundles: {last} (set {MAX_RETRIES_ENV} to wait longer)")

    # ---- creation ----------------------------------------------------------------------------
    def _bundle(self) -> dict[str, float]:
        return {"CPU": self.max_colocated_worker_groups, "GPU": 1 if self.use_gpus else 0}

    def _check_resources(self) -> None:
        import ray

        total = sum(self._bundle_ct_per_node_list)
        need = {"CPU": total * self.max_colocated_worker_groups, "GPU": total if self.use_gpus else 0}
        have = ray.cluster_resources()
        short = {k: (v, have.get(k, 0)) for k, v in need.items() if v > have.get(k, 0)}
        if short:
            what = ", ".join(f"{k}: need {n:g}, cluster has {h:g}" for k, (n, h) in short.items())
            raise ResourceInsufficientError(f"not enough resources for the virtual cluster ({what})")

    def _init_placement_groups(self, strategy: str | None = None) -> list[Any]:
        import ray
        from ray.util.placement_group import placement_group, remove_placement_group

        self._check_resources()
        bundle = self._bundle()
        pgs = [placement_group([dict(bundle) for _ in range(n)], strategy=strategy or self.placement_group_strategy,
                               name=f"{self.name}-node{i}" if self.name else "")
               for i, n in enumerate(self._bundle_ct_per_node_list) if n > 0]
        try:
            ray.get([pg.ready() for pg in pgs], timeout=PLACEMENT_GROUP_TIMEOUT_S)
        except (ray.exceptions.GetTimeoutError, TimeoutError):
            for pg in pgs:
                remove_placement_group(pg)
            raise TimeoutError(
                f"placement groups for {self._bundle_ct_per_node_list} bundles were not ready within "
                f"{PLACEMENT_GROUP_TIMEOUT_S:g} s; the cluster may lack resources (ray status shows them)") from None
        return pgs

    # ---- queries -----------------------------------------------------------------------------
    def get_placement_groups(self) -> list[Any]:
        return [pg for pg in (self._node_placement_groups or []) if pg.bundle_specs]

    def world_size(self) -> int:
        return sum(self._bundle_ct_per_node_list)

    def node_count(self) -> int:
        return sum(1 for n in self._bundle_ct_per_node_list if n > 0)

    @property
    def bundle_ct_per_node_list(self) -> list[int]:
        return list(self._bundle_ct_per_node_list)

    def _probe(self) -> Any:
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        pg = self.get_placement_groups()[0]
        return _get_node_ip_and_free_port.options(scheduling_strategy=PlacementGroupSchedulingStrategy(
            placement_group=pg, placement_group_bundle_index=0)).remote()

    def get_master_address_and_port(self) -> tuple[str, int]:
        """IP of bundle 0's node and a free port there, from a zero-CPU task in bundle 0.

        A zero-CPU task needs a fresh worker process (seconds on a busy node), so the cluster
        keeps one probe running ahead: a call takes its result and starts the next one. Each
        call still gets its own port."""
        import ray

        ref = self._next_probe if self._next_probe is not None else self._probe()
        self._next_probe = self._probe()
        return ray.get(ref)

    # ---- views -------------------------------------------------------------------------------
    def print_cluster_grid(self, worker_group: Any = None) -> None:
        from .cluster_grid import cluster_grid

        print(cluster_grid(self._bundle_ct_per_node_list, worker_group))

    def print_all_worker_groups(self, worker_groups: list[Any] | None = None) -> None:
        from .cluster_grid import all_groups_grid

        print(all_groups_grid(self._bundle_ct_per_node_list, worker_groups or []))

    # ---- teardown ----------------------------------------------------------------------------
    def shutdown(self) -> bool:
        """Remove every placement group; idempotent."""
        if not self._shut_down and self._node_placement_groups:
            try:
                import ray
                from ray.util.placement_group import remove_placement_group

                if ray.is_initialized():
                    if self._next_probe is not None:
                        ray.cancel(self._next_probe)
                    for pg in self._node_placement_groups:
                        remove_placement_group(pg)
            except Exception as exc:  # noqa: BLE001 - shutdown must not raise
                logger.warning("RayVirtualCluster.shutdown: %s", exc)
        self._node_placement_groups = []
        self._next_probe = None
        self._shut_down = True
        return True

    def __del__(self) -> None:
        try:
            self.shutdown()
        except Exception:  # noqa: BLE001 - never raise from a finalizer (Ray may be gone)
            pass
