"""Worker-side torch.distributed, from the environment a RayWorkerGroup gives its workers
(RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT) and the options of the cluster and group:

    from slurm_rl.distributed.collective import init_process_group, wrap_ddp

    class PolicyWorker:
        def __init__(self):
            init_process_group()                 # the cluster's communication_backend
            self.model = wrap_ddp(MyModel())     # fp16 gradients with enable_gradient_compression

        def on_group_restart(self):              # called by restart_failed_workers()
            init_process_group()                 # the new MASTER_PORT; reload state here

The backend is ``communication_backend`` of the RayVirtualCluster when given, else NCCL where
CUDA is available and gloo elsewhere."""

from __future__ import annotations

import datetime
import os
from typing import Any

from ...core.job_env import BACKEND_ENV, COMPRESSION_ENV, Settings  # noqa: F401 - importable here as before


def backend() -> str:
    import torch

    chosen = Settings.current().comm_backend or ("nccl" if torch.cuda.is_available() else "gloo")
    if chosen == "nccl" and not torch.cuda.is_available():
        raise RuntimeError(
            "communication_backend='nccl' but this worker sees no CUDA device "
            f"(CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES')!r}); use 'gloo' on CPUs"
        )
    return chosen


def init_process_group(timeout_s: float = 120.0) -> Any:
    """(Re)join the group's process group: an existing one is destroyed first, so the same call
    serves ``__init__`` and ``on_group_restart``. Returns the backend's name."""
    import torch.distributed as dist

    env = {k: os.environ.get(k) for k in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")}
    missing = [k for k, v in env.items() if not v]
    if missing:
        raise RuntimeError(f"init_process_group: {', '.join(missing)} not set; call it inside a RayWorkerGroup worker")
    if dist.is_initialized():
        dist.destroy_process_group()
    name = backend()
    if name == "nccl":
        import torch

        torch.cuda.set_device(0)  # the worker's CUDA_VISIBLE_DEVICES names its device(s)
    dist.init_process_group(
        name,
        init_method=f"tcp://{env['MASTER_ADDR']}:{env['MASTER_PORT']}",
        rank=int(env["RANK"] or 0),
        world_size=int(env["WORLD_SIZE"] or 1),
        timeout=datetime.timedelta(seconds=timeout_s),
    )
    return name


def compression_enabled() -> bool:
    return Settings.current().fp16_gradients


def wrap_ddp(model: Any, **ddp_kwargs: Any) -> Any:
    """``DistributedDataParallel(model)``; with the group's ``enable_gradient_compression`` it
    all-reduces gradients in fp16 (torch's ``fp16_compress_hook``): half the bytes, fp16
    rounding on the averaged gradients."""
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
    from torch.nn.parallel import DistributedDataParallel

    ddp = DistributedDataParallel(model, **ddp_kwargs)
    if compression_enabled():
        ddp.register_comm_hook(state=None, hook=default_hooks.fp16_compress_hook)
    return ddp
