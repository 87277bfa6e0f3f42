"""A generation worker shaped like NeMo RL's vLLM worker, without vLLM: it derives
BaseVllmGenerationWorker for its placement and reports what it was given."""

from __future__ import annotations

import os
from typing import Any

from slurm_rl.models.generation.vllm import BaseVllmGenerationWorker


class EngineWorker(BaseVllmGenerationWorker):
    def __init__(self, bundle_indices: list[int] | None = None, seed: int | None = None, fraction_of_gpus: float = 1.0):
        self.given = {"bundle_indices": bundle_indices, "seed": seed, "fraction_of_gpus": fraction_of_gpus}

    def report(self) -> dict[str, Any]:
        return {
            **self.given,
            "port": os.environ.get("VLLM_PORT"),
            "noset": os.environ.get("RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES"),
        }
