"""Public path of NeMo RL's ``nemo_rl.utils.nsys`` (implemented in distributed/worker_env/nsys.py)."""

from ..distributed.worker_env.nsys import _parse_extra_options

__all__ = ["_parse_extra_options"]
