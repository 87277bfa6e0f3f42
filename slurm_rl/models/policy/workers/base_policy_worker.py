"""The part of NeMo RL's ``AbstractPolicyWorker`` that slurm-rl owns: the refit group, the NCCL
group a trainer rank shares with the generation workers to send them its weights. Elastic
recovery rebuilds it whenever the generation fleet changes, so a rebuild first releases the
group it replaces (an overwritten group would strand a communicator and a TCPStore per
recovery). A policy worker class derives from this and sets ``self.rank``."""

from __future__ import annotations

from typing import Any

import torch

from ....distributed import stateless_process_group as spg


class AbstractPolicyWorker:
    rank: int
    model_update_group: Any = None

    def init_collective(self, ip: str, port: int, world_size: int, *, train_world_size: int) -> None:
        """Join the refit group at ``ip:port`` as this trainer rank (the generation workers
        take the ranks from ``train_world_size`` on), releasing the previous one."""
        if not 0 <= self.rank < train_world_size <= world_size:
            raise ValueError(
                f"trainer rank {self.rank} of {train_world_size} cannot join a refit group of {world_size}"
            )
        previous, self.model_update_group = self.model_update_group, None
        if previous is not None:
            previous.abort()
            torch.cuda.empty_cache()
        group = spg.StatelessProcessGroup(master_address=ip, port=port, rank=self.rank, world_size=world_size)
        group.init_nccl_communicator(device=torch.cuda.current_device())
        self.model_update_group = group
