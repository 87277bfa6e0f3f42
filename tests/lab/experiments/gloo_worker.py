"""A worker that joins a torch.distributed (gloo) group from the env vars RayWorkerGroup sets."""

from __future__ import annotations

import os
import socket


class GlooWorker:
    def allreduce(self, value: float) -> dict:
        import torch
        import torch.distributed as dist

        rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
        dist.init_process_group(
            "gloo",
            init_method=f"tcp://{os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']}",
            rank=rank,
            world_size=world,
        )
        t = torch.tensor([value])
        dist.all_reduce(t)
        dist.destroy_process_group()
        return {
            "sum": t.item(),
            "rank": rank,
            "node_rank": int(os.environ["NODE_RANK"]),
            "ip": socket.gethostbyname(socket.gethostname()),
            "host": socket.gethostname(),
        }
