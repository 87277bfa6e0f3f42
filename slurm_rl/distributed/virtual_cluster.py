"""Public path of NeMo RL's ``nemo_rl.distributed.virtual_cluster``: the virtual cluster,
``init_ray``, ``PY_EXECUTABLES``, the port-range constants and the module-level helpers NeMo
RL's code imports from here (``_get_node_ip_local``, ``_get_free_port_local``, ...).

This name is the implementation module itself (``api/virtual_cluster.py``), not a copy of its
names: a test or a user that patches ``slurm_rl.distributed.virtual_cluster._get_node_ip_and_free_port``
patches what the cluster calls, as with NeMo RL."""

import sys

from .api import virtual_cluster as _implementation

sys.modules[__name__] = _implementation
