"""StatelessProcessGroup (NeMo RL 2026) without a GPU: the store rendezvous, the clear failure
where NCCL cannot run, and the abort lifecycle (never hangs, idempotent, later broadcasts say so)."""

from __future__ import annotations

import socket

import pytest
import torch

from slurm_rl.distributed.stateless_process_group import GroupAborted, StatelessProcessGroup


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Communicator:
    def __init__(self) -> None:
        self.aborts = self.broadcasts = 0

    def abort(self) -> None:
        self.aborts += 1

    def broadcast(self, tensors, root):
        self.broadcasts += 1
        return self

    def wait(self) -> None:
        return None


def test_without_a_gpu_the_nccl_group_fails_at_once_saying_so() -> None:
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    group = StatelessProcessGroup("127.0.0.1", _free_port(), rank=0, world_size=2)
    with pytest.raises(RuntimeError, match=r"needs a CUDA GPU and NCCL.*use a gloo group on CPU"):
        group.init_nccl_communicator(0)
    with pytest.raises(RuntimeError, match="init_nccl_communicator\\(\\) was never called") as never:
        group.broadcast(torch.ones(1), src=0)
    assert not isinstance(never.value, GroupAborted)
    with pytest.raises(ValueError, match="rank 2 is not in a group of world_size 2"):
        StatelessProcessGroup("127.0.0.1", _free_port(), rank=2, world_size=2)


def test_abort_releases_once_and_every_later_broadcast_reports_it() -> None:
    group = StatelessProcessGroup("127.0.0.1", _free_port(), rank=0, world_size=2)
    group.abort()  # before any communicator: nothing to release
    group.nccl_communicator = comm = Communicator()
    group.broadcast(torch.ones(1), src=0)
    group.abort()
    group.abort()
    assert comm.aborts == 1 and comm.broadcasts == 1
    assert group.nccl_communicator is None and group.tcp_store is None
    for _ in range(3):
        with pytest.raises(GroupAborted, match="aborted mid-collective"):
            group.broadcast(torch.ones(1), src=0)
