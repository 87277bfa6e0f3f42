"""Worker classes the driver-API tests create by fully qualified name."""

from __future__ import annotations

import os
import socket
import time
from typing import Any


class EnvWorker:
    def __init__(self, tag: str = "", extra: int = 0) -> None:
        self.tag, self.extra = tag, extra
        self.cleaned = False

    def env(self) -> dict[str, str]:
        keys = (
            "RANK",
            "LOCAL_RANK",
            "WORLD_SIZE",
            "MASTER_ADDR",
            "MASTER_PORT",
            "NODE_RANK",
            "CONFIGURED",
            "USER_LEVEL",
        )
        return {k: os.environ.get(k, "") for k in keys}

    def init_args(self) -> tuple[str, int]:
        return self.tag, self.extra

    def echo(self, x: Any, scale: int = 1) -> Any:
        return x * scale if isinstance(x, int) else x

    def size_of(self, batch: Any) -> int:
        return batch.size

    def noop(self) -> None:
        return None

    def host(self) -> str:
        return socket.gethostname()

    def other_env(self) -> str:
        return os.environ.get("OTHER_ENV", "unset")

    def cleanup(self) -> bool:
        return True

    def slow_cleanup(self) -> bool:
        time.sleep(30)
        return True


class ConfiguredWorker(EnvWorker):
    @staticmethod
    def configure_worker(num_gpus: float, bundle_indices: Any) -> tuple[dict, dict, dict]:  # type: ignore[type-arg]
        return {"num_gpus": 0}, {"CONFIGURED": f"yes-{bundle_indices is not None}"}, {"extra": 7}


class TopologyConfiguredWorker(EnvWorker):
    """NeMo RL 2026's configure_worker: also told how many GPUs a node has."""

    @staticmethod
    def configure_worker(
        num_gpus: float, bundle_indices: Any = None, num_gpus_per_node: int | None = None
    ) -> tuple[dict, dict, dict, dict]:  # type: ignore[type-arg]
        return {"num_gpus": 0}, {"CONFIGURED": f"per-node-{num_gpus_per_node}"}, {}, {}

    def pid(self) -> int:
        return os.getpid()

    def python_env(self) -> tuple[str, str]:
        return os.environ.get("OTHER_ENV", "unset"), os.environ.get("CONFIGURED", "")


class AddressWorker(EnvWorker):
    def addresses(self) -> tuple[str, str, str, str]:
        return (
            os.environ.get("AVAILABLE_ADDR_LIST", ""),
            os.environ.get("AVAILABLE_PORT_LIST", ""),
            os.environ.get("NRL_WORKER_GROUP", ""),
            os.environ.get("MASTER_PORT", ""),
        )
