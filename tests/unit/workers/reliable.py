"""Worker classes for the reliability tests (unit and lab): ones that can be killed, stall,
hog memory, cost a known time, and a gloo rank that rejoins its group after a restart."""

from __future__ import annotations

import os
import socket
import time
from typing import Any


class ProbeWorker:
    def __init__(self, tag: str = "") -> None:
        self.tag = tag
        self.hooks = 0

    def ident(self) -> dict[str, Any]:
        return {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "rank": int(os.environ["RANK"]),
            "tag": self.tag,
            "master_port": os.environ["MASTER_PORT"],
            "hooks": self.hooks,
            "cuda": os.environ.get("CUDA_VISIBLE_DEVICES"),
            "backend": os.environ.get("SLURM_RL_COMM_BACKEND"),
        }

    def noop(self) -> None:
        return None

    def sleep(self, seconds: float) -> int:
        time.sleep(seconds)
        return int(os.environ["RANK"])

    def cost(self, item: tuple[int, int], unit_s: float = 0.01) -> tuple[int, int]:
        """Sleep ``units * unit_s``; return the item's index and the rank that ran it."""
        index, units = item
        time.sleep(units * unit_s)
        return index, int(os.environ["RANK"])

    def hog(self, megabytes: int, hold_s: float = 30.0) -> int:
        block = bytearray(megabytes * 2**20)
        for i in range(0, len(block), 4096):
            block[i] = 1  # touch every page: resident, not just reserved
        time.sleep(hold_s)
        return len(block)

    def on_group_restart(self) -> None:
        self.hooks += 1


class GlooRank:
    """Joins the group's gloo process group at start and again after a restart."""

    def __init__(self) -> None:
        from slurm_rl.distributed.worker_env.collective import init_process_group

        self.backend = init_process_group(timeout_s=60)
        self.restarted = 0

    def pid(self) -> int:
        return os.getpid()

    def allreduce(self, value: float) -> float:
        import torch
        import torch.distributed as dist

        t = torch.tensor([value])
        dist.all_reduce(t)
        return t.item()

    def on_group_restart(self) -> None:
        from slurm_rl.distributed.worker_env.collective import init_process_group

        init_process_group(timeout_s=60)
        self.restarted += 1

    def compressed_grad(self) -> list[float]:
        """The averaged gradient of a one-weight model whose ranks disagree in the 5th digit:
        fp16 compression rounds it, full precision does not."""
        import torch

        from slurm_rl.distributed.worker_env.collective import wrap_ddp

        model = torch.nn.Linear(1, 1, bias=False)
        torch.nn.init.constant_(model.weight, 1.0)
        ddp = wrap_ddp(model)
        x = torch.tensor([[1.0 + 1e-4 * (int(os.environ["RANK"]) + 1)]])
        ddp(x).sum().backward()
        return [float(model.weight.grad.item()), float(x.item())]


class LightPolicyWorker:
    """The documentation's PolicyWorker/GenerationWorker placeholders, without a model (no torch
    import: the reliability examples build many workers on 2 cores)."""

    def train_step(self, batch: Any, *more: Any) -> dict[str, float]:
        return {"loss": float(len(batch["input"]) if batch else 0)}

    def generate(self, batch: Any) -> list[str]:
        return [f"{p} -> ok" for p in batch["input"]]
