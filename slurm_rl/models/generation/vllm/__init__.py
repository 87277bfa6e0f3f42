"""vLLM engines' placement (``nemo_rl.models.generation.vllm``): see ``vllm_worker``."""

from .vllm_worker import BaseVllmGenerationWorker, vllm_port

__all__ = ["BaseVllmGenerationWorker", "vllm_port"]
