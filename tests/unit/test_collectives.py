"""collectives (NeMo RL 2026) on a real 3-process gloo group: uneven rows and uneven lists."""

from __future__ import annotations

import socket

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from slurm_rl.distributed.collectives import gather_jagged_object_lists, rebalance_nd_tensor

pytestmark = [pytest.mark.timeout(120)]


def _rank(rank: int, world: int, port: int, out: dict) -> None:
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    try:
        local = torch.full((rank + 1, 2), float(rank + 1))  # rank r has r+1 rows of value r+1
        stacked = rebalance_nd_tensor(local)
        objects = gather_jagged_object_lists([f"r{rank}-{i}" for i in range(rank)])
        out[rank] = (stacked.tolist(), objects)
    finally:
        dist.destroy_process_group()


def test_uneven_rows_and_lists_in_rank_order_on_every_rank() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with mp.Manager() as manager:
        out = manager.dict()
        mp.spawn(_rank, args=(3, port, out), nprocs=3, join=True)
        results = dict(out)
    rows = [[1.0, 1.0]] + [[2.0, 2.0]] * 2 + [[3.0, 3.0]] * 3
    assert all(results[r] == (rows, ["r1-0", "r2-0", "r2-1"]) for r in range(3)), results
