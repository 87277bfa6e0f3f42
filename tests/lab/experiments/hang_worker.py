"""A worker that joins a gloo group and then either all-reduces or, on the rank told to hang,
sleeps instead: its peers wait in the all_reduce for it, as one stuck rank stalls a real run."""

from __future__ import annotations

import os
import time


class HangWorker:
    def step(self, hang_rank: int) -> float:
        import torch
        import torch.distributed as dist

        rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
        dist.init_process_group(
            "gloo",
            init_method=f"tcp://{os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']}",
            rank=rank,
            world_size=world,
        )
        if rank == hang_rank:
            time.sleep(600)  # never joins the collective below
        t = torch.tensor([float(rank)])
        dist.all_reduce(t)
        return float(t.item())
