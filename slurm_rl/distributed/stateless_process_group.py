"""NeMo RL 2026's ``nemo_rl.distributed.stateless_process_group``: a NCCL group between processes
that are not one ``torch.distributed`` world (a trainer and its generation workers exchanging
weights), built from a TCPStore rendezvous, torn down and rebuilt as membership changes.

Rank 0 makes a NCCL unique id and publishes it in the store; every rank builds its communicator
from it with NVIDIA's NCCL bindings (``nccl4py``, as NeMo RL does: installed with the GPU stack,
never on CPU-only nodes). The peer may be another slurm-rl/NeMo RL process ("nemo": the id under
``nccl_unique_id``, a broadcast from rank 0 to check the wiring) or vLLM's own stateless group
("vllm": the id also pickled as vLLM's ``ncclUniqueId`` under the key vLLM reads, and an
all-reduce warm-up, as vLLM does). The lifecycle is NeMo RL's: ``abort`` never hangs, is
idempotent and drops the communicator before releasing it; a broadcast on a group never built
says so, and every broadcast after an abort raises ``RefitAborted``.
"""

from __future__ import annotations

import importlib
import struct
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

from .refit_watchdog import RefitAborted

GroupAborted = RefitAborted  # its earlier name here

NCCL_UNIQUE_ID_BYTES = 128
_NEMO_UNIQUE_ID_KEY = "nccl_unique_id"
_VLLM_UNIQUE_ID_KEY = "broadcast_from/0/0"  # vLLM's StatelessProcessGroup.broadcast_obj, first object of rank 0
_VLLM_NCCL_MODULE = "vllm.distributed.device_communicators.pynccl_wrapper"


class _NoNccl:
    """Stands for nccl4py where it is not installed: any use says what is missing."""

    def __init__(self, *_: Any, **__: Any) -> None:
        self._fail()

    @staticmethod
    def _fail(*_: Any, **__: Any) -> Any:
        raise RuntimeError(
            "StatelessProcessGroup needs NCCL's Python bindings (nccl4py, installed with NeMo RL's GPU stack) "
            "and a CUDA GPU; this process has neither. Give its worker GPUs (RayVirtualCluster(use_gpus=True)) "
            "in an environment with nccl4py, or use a gloo group on CPU (slurm_rl.distributed.collective)"
        )

    init = from_bytes = _fail


def _nccl() -> tuple[Any, Any, Any, Any]:
    """NVIDIA's NCCL bindings (GPU nodes): Communicator, UniqueId, get_unique_id, SUM."""
    try:
        utils = importlib.import_module("nccl.core.utils")
        communicator = importlib.import_module("nccl.core.communicator").Communicator
        return (
            communicator,
            utils.UniqueId,
            utils.get_unique_id,
            getattr(importlib.import_module("nccl.core"), "SUM", "sum"),
        )
    except ImportError:
        return _NoNccl, _NoNccl, _NoNccl._fail, "sum"


Communicator, UniqueId, get_unique_id, SUM = _nccl()  # module names: tests replace them here


def _pickle_vllm_unique_id(unique_id: bytes) -> bytes:
    """``unique_id`` as a pickle that a vLLM process loads as its own ``ncclUniqueId`` (a ctypes
    struct of 128 bytes), without vLLM here: ``ncclUniqueId.from_buffer_copy(unique_id)``."""
    if len(unique_id) != NCCL_UNIQUE_ID_BYTES:
        raise ValueError(f"vLLM needs a 128-byte NCCL unique ID, got {len(unique_id)} bytes")
    target = f"{_VLLM_NCCL_MODULE}\nncclUniqueId.from_buffer_copy\n".encode()
    # protocol 4 (dotted names), GLOBAL, BINBYTES, TUPLE1, REDUCE, STOP
    return b"\x80\x04c" + target + b"B" + struct.pack("<I", len(unique_id)) + unique_id + b"\x85R."


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

    def _unique_id(self, peer: str) -> Any:
        if self.rank == 0:
            unique_id = get_unique_id()
            self.tcp_store.set(_NEMO_UNIQUE_ID_KEY, unique_id.as_bytes)
            if peer == "vllm":
                self.tcp_store.set(_VLLM_UNIQUE_ID_KEY, _pickle_vllm_unique_id(unique_id.as_bytes))
            return unique_id
        self.tcp_store.wait([_NEMO_UNIQUE_ID_KEY])
        return UniqueId.from_bytes(self.tcp_store.get(_NEMO_UNIQUE_ID_KEY))

    def init_nccl_communicator(self, device: int | torch.device, *, peer: str = "nemo") -> None:
        """The NCCL communicator on ``device`` (a CUDA device of this process), checked by a
        warm-up collective of the kind the peer expects."""
        if peer not in ("nemo", "vllm"):
            raise ValueError(f"peer={peer!r}: 'nemo' (NeMo RL or slurm-rl) or 'vllm' (vLLM's stateless group)")
        unique_id = self._unique_id(peer)
        with torch.cuda.device(device):
            communicator = Communicator.init(nranks=self.world_size, rank=self.rank, unique_id=unique_id)
            stream = torch.cuda.current_stream()
            if peer == "vllm":
                data = torch.zeros(1, device=device)
                communicator.allreduce(sendbuf=data, recvbuf=data, op=SUM, stream=stream.cuda_stream)
                stream.synchronize()
            else:
                data = torch.ones(1, device=device) if self.rank == 0 else torch.zeros(1, device=device)
                communicator.broadcast(sendbuf=data, recvbuf=data, root=0, stream=stream.cuda_stream)
                stream.synchronize()
                if not torch.allclose(data, torch.ones(1, device=device)):
                    raise RuntimeError(f"StatelessProcessGroup: the NCCL warm-up broadcast gave {data}, not 1.0")
        self.nccl_communicator = communicator

    def broadcast(self, tensor: torch.Tensor, src: int, stream: Any = None) -> None:
        communicator = self.nccl_communicator  # read once: an abort from another thread may clear it
        if communicator is None:
            if self._aborted:
                raise RefitAborted(
                    "StatelessProcessGroup was aborted mid-collective (its peer went away); rebuild the group"
                )
            raise RuntimeError("StatelessProcessGroup.broadcast: init_nccl_communicator() was never called")
        if stream is None:
            stream = torch.cuda.current_stream()
        communicator.broadcast(sendbuf=tensor, recvbuf=tensor, root=src, stream=stream.cuda_stream)

    def abort(self) -> None:
        """Release the communicator and the store; never waits on peers; idempotent."""
        communicator, self.nccl_communicator = self.nccl_communicator, None
        self.tcp_store = None
        if communicator is None:
            return
        self._aborted = True
        communicator.abort()
