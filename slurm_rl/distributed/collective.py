"""Public path of the workers' torch.distributed helpers (implemented in worker_env/)."""

from .worker_env.collective import backend, compression_enabled, init_process_group, wrap_ddp

__all__ = ["backend", "compression_enabled", "init_process_group", "wrap_ddp"]
