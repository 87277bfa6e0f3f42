"""NeMo RL 2026's ``nemo_rl.distributed.collectives``: gathering uneven per-rank results.

- ``rebalance_nd_tensor(t)``: every rank's tensor (same trailing shape, any number of rows)
  stacked in rank order, on every rank.
- ``gather_jagged_object_lists(objs)``: every rank's list of picklable objects, concatenated in
  rank order, on every rank (synchronous).

Both work on whatever backend the group has: on NCCL the tensors live on the current CUDA
device (as in NeMo RL), on gloo (CPU, the lab) on the CPU.
"""

from __future__ import annotations

from typing import Any, TypeVar

import torch
import torch.distributed as dist

T = TypeVar("T")


def _device(group: Any) -> torch.device:
    if dist.get_backend(group) == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def rebalance_nd_tensor(tensor: torch.Tensor, group: Any = None) -> torch.Tensor:
    device = _device(group)
    world = dist.get_world_size(group)
    rows = torch.tensor([tensor.size(0)], dtype=torch.int64, device=device)
    counts = [torch.zeros(1, dtype=torch.int64, device=device) for _ in range(world)]
    dist.all_gather(counts, rows, group=group)
    sizes = [int(c.item()) for c in counts]
    out = torch.zeros((sum(sizes), *tensor.shape[1:]), dtype=tensor.dtype, device=device)
    start = sum(sizes[: dist.get_rank(group)])
    out[start : start + tensor.size(0)].copy_(tensor)
    dist.all_reduce(out, group=group)  # each row is non-zero on exactly one rank
    return out


def gather_jagged_object_lists(local_objects: list[T], group: Any = None) -> list[T]:
    gathered: list[Any] = [None] * dist.get_world_size(group)
    dist.all_gather_object(gathered, local_objects, group=group)
    return [obj for per_rank in gathered for obj in per_rank]
