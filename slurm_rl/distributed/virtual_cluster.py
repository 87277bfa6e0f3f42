"""Public path of NeMo RL's ``nemo_rl.distributed.virtual_cluster`` (implemented in api/):
the virtual cluster, ``init_ray`` and ``PY_EXECUTABLES`` live here in NeMo RL."""

from .api.ray_init import PY_EXECUTABLES, init_ray
from .api.virtual_cluster import ClusterConfig, RayVirtualCluster, ResourceInsufficientError

__all__ = ["PY_EXECUTABLES", "ClusterConfig", "RayVirtualCluster", "ResourceInsufficientError", "init_ray"]
