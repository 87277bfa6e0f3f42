"""StatelessProcessGroup (NeMo RL 2026) without a GPU: the store rendezvous, the clear failure
where NCCL cannot run, the unique id and warm-up each kind of peer expects (vLLM's own group
reads a pickled ctypes id), the abort lifecycle, and the refit watchdog that aborts a stuck one."""

from __future__ import annotations

import ctypes
import pickle
import socket
import sys
import threading
import types
from contextlib import nullcontext

import pytest
import torch

from slurm_rl.distributed import stateless_process_group as spg
from slurm_rl.distributed.refit_watchdog import RefitAborted, RefitWatchdog
from slurm_rl.distributed.stateless_process_group import GroupAborted, StatelessProcessGroup


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Communicator:
    """nccl4py's communicator as the group drives it: keyword collectives on a CUDA stream."""

    def __init__(self) -> None:
        self.aborts, self.calls = 0, []

    def abort(self) -> None:
        self.aborts += 1

    def broadcast(self, **kw):  # type: ignore[no-untyped-def]
        self.calls.append(("broadcast", kw))

    def allreduce(self, **kw):  # type: ignore[no-untyped-def]
        self.calls.append(("allreduce", kw))


class Stream:
    cuda_stream = 7
    synchronized = False

    def synchronize(self) -> None:
        self.synchronized = True


def test_without_nccl_the_group_fails_at_once_saying_so() -> None:
    if spg.Communicator is not spg._NoNccl:
        pytest.skip("this machine has NCCL's bindings")
    group = StatelessProcessGroup("127.0.0.1", _free_port(), rank=0, world_size=2)
    with pytest.raises(RuntimeError, match=r"needs NCCL's Python bindings .*use a gloo group on CPU"):
        group.init_nccl_communicator(0)
    with pytest.raises(RuntimeError, match="init_nccl_communicator\\(\\) was never called") as never:
        group.broadcast(torch.ones(1), src=0, stream=Stream())
    assert not isinstance(never.value, GroupAborted)
    with pytest.raises(ValueError, match="rank 2 is not in a group of world_size 2"):
        StatelessProcessGroup("127.0.0.1", _free_port(), rank=2, world_size=2)


@pytest.fixture
def fake_vllm():  # type: ignore[no-untyped-def]
    """vLLM's pynccl_wrapper module with its ctypes ncclUniqueId, importable by name."""
    parts = spg._VLLM_NCCL_MODULE.split(".")
    names = [".".join(parts[: i + 1]) for i in range(len(parts))]
    saved = {n: sys.modules.get(n) for n in names}
    for n in names:
        sys.modules[n] = types.ModuleType(n)
    uid = type("ncclUniqueId", (ctypes.Structure,), {"_fields_": [("internal", ctypes.c_byte * 128)]})
    sys.modules[names[-1]].ncclUniqueId = uid  # type: ignore[attr-defined]
    yield uid
    for n, m in saved.items():
        sys.modules.pop(n) if m is None else sys.modules.__setitem__(n, m)


@pytest.mark.parametrize("peer", ["nemo", "vllm"])
def test_each_peer_gets_the_id_where_it_looks_and_its_own_warm_up(monkeypatch, fake_vllm, peer: str) -> None:  # type: ignore[no-untyped-def]
    raw = bytes(range(128))
    comm, stream = Communicator(), Stream()
    monkeypatch.setattr(spg, "get_unique_id", lambda: types.SimpleNamespace(as_bytes=raw))
    monkeypatch.setattr(spg.Communicator, "init", lambda **kw: comm if kw["nranks"] == 2 else None)
    monkeypatch.setattr(spg.torch.cuda, "device", lambda _d: nullcontext())
    monkeypatch.setattr(spg.torch.cuda, "current_stream", lambda: stream)
    group = StatelessProcessGroup("127.0.0.1", _free_port(), rank=0, world_size=2)
    group.init_nccl_communicator("cpu", peer=peer)
    assert group.tcp_store.get(spg._NEMO_UNIQUE_ID_KEY) == raw and stream.synchronized
    kind, kw = comm.calls[0]
    assert kw["stream"] == 7 and len(comm.calls) == 1
    if peer == "vllm":
        uid = pickle.loads(group.tcp_store.get("broadcast_from/0/0"))
        assert isinstance(uid, fake_vllm) and bytes(uid) == raw
        assert (kind, kw["op"], kw["sendbuf"].item()) == ("allreduce", spg.SUM, 0.0)
    else:
        assert (kind, kw["root"], kw["sendbuf"].item()) == ("broadcast", 0, 1.0)
        assert group.tcp_store.check(["broadcast_from/0/0"]) is False
    with pytest.raises(ValueError, match="128-byte NCCL unique ID"):
        spg._pickle_vllm_unique_id(b"short")


def test_abort_releases_once_and_every_later_broadcast_reports_it() -> None:
    group = StatelessProcessGroup("127.0.0.1", _free_port(), rank=0, world_size=2)
    group.abort()  # before any communicator: nothing to release
    group.nccl_communicator = comm = Communicator()
    group.broadcast(torch.ones(1), src=0, stream=Stream())
    group.abort()
    group.abort()
    assert comm.aborts == 1 and len(comm.calls) == 1
    assert group.nccl_communicator is None and group.tcp_store is None
    for _ in range(3):
        with pytest.raises(RefitAborted, match="aborted mid-collective"):
            group.broadcast(torch.ones(1), src=0, stream=Stream())


def test_the_watchdog_aborts_a_refit_that_outlives_its_timeout() -> None:
    group = StatelessProcessGroup("127.0.0.1", _free_port(), rank=0, world_size=2)
    group.nccl_communicator = comm = Communicator()
    with RefitWatchdog(group, timeout_s=5) as quick:
        group.broadcast(torch.ones(1), src=0, stream=Stream())
    assert not quick.fired and comm.aborts == 0
    aborted = threading.Event()
    comm.abort = aborted.set  # type: ignore[method-assign]  # the stuck collective's release
    with RefitWatchdog(group, timeout_s=0.2) as guard:
        assert aborted.wait(timeout=10)  # the block outlives its timeout: the timer aborts the group
    assert guard.fired and group.nccl_communicator is None
    with pytest.raises(RefitAborted):
        group.broadcast(torch.ones(1), src=0, stream=Stream())


def test_a_policy_workers_refit_group_is_released_before_it_is_rebuilt(monkeypatch) -> None:
    from slurm_rl.models.policy.workers.base_policy_worker import AbstractPolicyWorker

    made: list[types.SimpleNamespace] = []

    def group(**kw):  # type: ignore[no-untyped-def]
        g = types.SimpleNamespace(kw=kw, aborts=0, init_nccl_communicator=lambda device: None)
        g.abort = lambda: setattr(g, "aborts", g.aborts + 1)
        made.append(g)
        return g

    monkeypatch.setattr(spg, "StatelessProcessGroup", group)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: None)

    class Policy(AbstractPolicyWorker):
        rank = 1

    worker = Policy()
    worker.init_collective("10.0.0.1", 5000, world_size=4, train_world_size=2)
    worker.init_collective("10.0.0.1", 5001, world_size=3, train_world_size=2)  # a generation worker was lost
    assert [g.aborts for g in made] == [1, 0] and worker.model_update_group is made[1]
    assert made[1].kw == {"master_address": "10.0.0.1", "port": 5001, "rank": 1, "world_size": 3}
    with pytest.raises(ValueError, match="trainer rank 1 of 1"):
        worker.init_collective("10.0.0.1", 5002, world_size=3, train_world_size=1)
