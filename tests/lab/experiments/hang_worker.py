"""A worker that joins a gloo group and then either all-reduces or, on the rank told to hang,
sleeps instead: its peers wait in the all_reduce for it, as one stuck rank stalls a real run."""

from __future__ import annotations

import time

from gloo_worker import join_gloo_group


class HangWorker:
    def step(self, hang_rank: int, timeout_s: float | None = None) -> float:
        import torch
        import torch.distributed as dist

        rank = join_gloo_group(timeout_s)  # with a timeout, the peers' all_reduce raises
        if rank == hang_rank:
            time.sleep(600)  # never joins the collective below
        t = torch.tensor([float(rank)])
        dist.all_reduce(t)
        return float(t.item())
