"""Worker classes shaped like NeMo RL's: small CPU stand-ins for the documentation's model
workers, Ray actor classes declared with @ray.remote (with and without options), and workers
that fail to build in each way a user meets."""

from __future__ import annotations

import os
import threading
from typing import Any

import ray
import torch


class HuggingFacePolicyWorker:
    """Stands in for the documentation's policy/generation workers: a tiny torch model."""

    def __init__(self, model_name: str = "tiny") -> None:
        torch.manual_seed(0)
        self.model_name = model_name
        self.model = torch.nn.Linear(4, 1)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.1)

    def train_step(self, batch: Any, *more: Any) -> dict[str, float]:
        x = (
            torch.ones(len(batch["input"]), 4)
            if isinstance(batch, dict) or hasattr(batch, "size")
            else torch.ones(1, 4)
        )
        loss = (self.model(x) ** 2).mean()
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
        return {"loss": float(loss.detach())}

    def generate(self, batch: Any) -> Any:
        if isinstance(batch, str):
            return batch + " -> ok"
        return {"generated": [f"{p} -> ok" for p in batch["input"]], "input": list(batch["input"])}

    def rank(self) -> str:
        return os.environ.get("RANK", "")

    def host(self) -> str:
        import socket

        return socket.gethostname()


PolicyWorker = HuggingFacePolicyWorker
VllmGenerationWorker = HuggingFacePolicyWorker


class GenerationWorker(HuggingFacePolicyWorker):
    pass


@ray.remote
class DecoratedWorker(HuggingFacePolicyWorker):
    """NeMo RL style: the worker class itself is a Ray actor class."""

    def env(self, name: str) -> str:
        return os.environ.get(name, "")


@ray.remote(max_concurrency=4, runtime_env={"env_vars": {"FROM_DECORATOR": "yes", "LAYER": "class"}})
class DecoratedWithOptions(HuggingFacePolicyWorker):
    """A decorated class with its own options: they stay, the builder's layer on top."""

    def __init__(self, model_name: str = "tiny", tag: str = "") -> None:
        super().__init__(model_name)
        self.tag = tag
        self._barrier = threading.Barrier(2, timeout=20)

    @staticmethod
    def configure_worker(num_gpus: float, bundle_indices: Any) -> tuple[dict, dict, dict, dict]:  # type: ignore[type-arg]
        return (
            {"num_gpus": num_gpus},
            {"CONFIGURED": "yes"},
            {"tag": "from-configure"},
            {"env_vars": {"LAYER": "configure-runtime-env"}},
        )

    def env(self, name: str) -> str:
        return os.environ.get(name, "")

    def get_tag(self) -> str:
        return self.tag

    def meet(self) -> bool:
        """Returns only when two calls are in the actor at once (max_concurrency kept)."""
        self._barrier.wait()
        return True


class ShardWorker:
    """Records what each call gave it."""

    def __init__(self) -> None:
        self.calls = 0

    def work(self, data: Any = None, extra: Any = None, scale: int = 1) -> tuple[int, Any, Any]:
        self.calls += 1
        payload = data.get_dict()["x"] if hasattr(data, "get_dict") else data
        return int(os.environ["RANK"]), payload, (None if extra is None else extra * scale)

    def call_count(self) -> int:
        return self.calls


class LauncherEnvWorker:
    def launcher_vars(self) -> list[str]:
        prefixes = ("SLURM_", "SLURMD_", "PMI_", "PMIX_", "OMPI_", "MPI_")
        return sorted(k for k in os.environ if k.startswith(prefixes) or k in ("RAY_JOB_ID", "RAY_RAYLET_PID"))

    def host(self) -> str:
        import socket

        return socket.gethostname()


class BrokenInit:
    def __init__(self) -> None:
        raise RuntimeError("checkpoint /nope/model.pt not found")


class BadConfigure:
    @staticmethod
    def configure_worker(num_gpus: float, bundle_indices: Any) -> Any:
        raise ValueError("configure_worker: tensor_parallel_size 3 does not divide 4 GPUs")


class UvProbe:
    """Reports the interpreter it runs in and a package only its uv environment has."""

    def probe(self) -> tuple[str, int]:
        import sys

        import srl_tinypkg  # type: ignore[import-not-found]

        return sys.executable, srl_tinypkg.VALUE
