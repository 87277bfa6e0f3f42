"""NeMo RL 2026's ``nemo_rl.distributed.stateless_process_group``: a NCCL group between processes
that are not one ``torch.distributed`` world (a trainer and its generation workers exchanging
weights), built from a TCPStore rendezvous, torn down and rebuilt as membership changes.

Here it is a ``torch.distributed`` NCCL process group object made directly on the store (no
global default group is touched, so any number can coexist), with NeMo RL's lifecycle: ``abort``
never hangs, is idempotent and drops the communicator before releasing it; a broadcast on a group
never built says so, and every broadcast after an abort raises ``GroupAborted``.

NCCL needs a CUDA GPU: ``init_nccl_communicator`` on a node without one fails at once, saying so
(on CPU, use a gloo group: ``slurm_rl.distributed.collective.init_process_group``). The CUDA path
runs only on GPU nodes; the lab and CI have none.
"""

from __future__ import annotations

import os
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist


class GroupAborted(RuntimeError):
    """A collective on a group that was aborted (a refit whose peer went away)."""


class StatelessProcessGroup:
    def __init__(self, master_address: str, port: int, rank: int, world_size: int, timeout_s: float = 300) -> None:
        if not 0 <= rank < world_size:
            raise ValueError(f"rank {rank} is not in a group of world_size {world_size}")
        self.master_address = master_address
        self.port = port
        self.rank = rank
        self.world_size = world_size
        self.nccl_communicator: Any = None
        self._aborted = False
        self.tcp_store: Any = dist.TCPStore(
            host_name=master_address,
            port=port,
            world_size=world_size,
            is_master=rank == 0,
            timeout=timedelta(seconds=timeout_s),
            wait_for_workers=False,
        )

    def init_nccl_communicator(self, device: int | torch.device, *, peer: str = "nemo") -> None:
        """The NCCL communicator on ``device`` (a CUDA device of this process)."""
        if peer not in ("nemo", "vllm"):
            raise ValueError(f"peer={peer!r}: 'nemo' or 'vllm'")
        if not torch.cuda.is_available():
            raise RuntimeError(
                "StatelessProcessGroup.init_nccl_communicator needs a CUDA GPU and NCCL, and this process has none "
                f"(CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES', '<unset>')!r}); give its worker "
                "GPUs (RayVirtualCluster(use_gpus=True)), or use a gloo group on CPU "
                "(slurm_rl.distributed.collective.init_process_group)"
            )
        torch.cuda.set_device(device)
        options = dist.ProcessGroupNCCL.Options()
        prefix = dist.PrefixStore(f"spg/{self.port}", self.tcp_store)
        self.nccl_communicator = dist.ProcessGroupNCCL(prefix, self.rank, self.world_size, options)
        # first collective: NCCL connects lazily; a broadcast from rank 0 checks the wiring now
        probe = torch.ones(1, device=torch.device("cuda", torch.cuda.current_device()))
        if self.rank != 0:
            probe.zero_()
        self.nccl_communicator.broadcast([probe], 0).wait()
        if float(probe.item()) != 1.0:
            raise RuntimeError(f"StatelessProcessGroup: the NCCL warm-up broadcast gave {probe.item()}, not 1.0")

    def broadcast(self, tensor: torch.Tensor, src: int, stream: Any = None) -> None:
        communicator = self.nccl_communicator  # read once: an abort from another thread may clear it
        if communicator is None:
            if self._aborted:
                raise GroupAborted(
                    "StatelessProcessGroup was aborted mid-collective (its peer went away); rebuild the group"
                )
            raise RuntimeError("StatelessProcessGroup.broadcast: init_nccl_communicator() was never called")
        communicator.broadcast([tensor], src).wait()

    def abort(self) -> None:
        """Release the communicator and the store; never waits on peers; idempotent."""
        communicator, self.nccl_communicator = self.nccl_communicator, None
        self.tcp_store = None
        if communicator is None:
            return
        self._aborted = True
        for name in ("abort", "shutdown"):
            release = getattr(communicator, name, None)
            if release is not None:
                release()
                return
