"""Where a vLLM engine's workers run and which ports it uses: NeMo RL's
``BaseVllmGenerationWorker.configure_worker``, without vLLM (it is imported by the user's worker
class, never here). A worker class that derives from ``BaseVllmGenerationWorker`` gets this
``configure_worker``; ``RayWorkerGroup`` calls it for every worker with the bundle indices of
its tied group (``(node, [local bundles])`` for an engine's first worker, None for the others)
and the cluster's ``num_gpus_per_node``.

Ports: each engine gets its own window of ``DEFAULT_VLLM_PORTS_PER_ENGINE`` ports from
``DEFAULT_VLLM_PORT_RANGE_LOW`` (``VLLM_PORT``), numbered by the engine's slot on its node, so
that engines sharing a node never race for a port, and every window stays below the kernel's
ephemeral range (no outgoing connection takes a port before vLLM binds it). An engine wider than
a node has its first worker alone on its node: slot 0."""

from __future__ import annotations

import os
from typing import Any

from ....distributed._engine.node_address import DEFAULT_VLLM_PORT_RANGE_LOW, DEFAULT_VLLM_PORTS_PER_ENGINE

DEFAULT_GPUS_PER_NODE = 8  # RayVirtualCluster's default; a 2025 caller does not pass it
SEED_STRIDE = 1024  # seeds: node * 1024 + engine slot


def vllm_port(local_bundles: list[int], num_gpus_per_node: int | None = None) -> int:
    """The base port of the engine whose bundles on its node are ``local_bundles``."""
    width = len(local_bundles)
    per_node = num_gpus_per_node or DEFAULT_GPUS_PER_NODE
    if width < 1:
        raise ValueError("an engine needs at least one bundle")
    slot = 0 if width > per_node else (local_bundles[0] % per_node) // width
    return DEFAULT_VLLM_PORT_RANGE_LOW + slot * DEFAULT_VLLM_PORTS_PER_ENGINE


class BaseVllmGenerationWorker:
    """Base of a vLLM generation worker: placement only (``configure_worker``)."""

    @staticmethod
    def configure_worker(
        num_gpus: float, bundle_indices: tuple[int, list[int]] | None = None, num_gpus_per_node: int | None = None
    ) -> tuple[dict[str, Any], dict[str, str], dict[str, Any], dict[str, Any]]:
        """(resources, env_vars, init_kwargs, runtime_env overrides) for one worker.

        An engine's first worker (``bundle_indices`` given) gets its local bundles and a seed
        (``node * 1024 + slot``, its own vLLM cache) in ``__init__``'s kwargs, and its port
        window. An engine over several GPUs lets vLLM place its processes in the bundles: its
        workers ask Ray for no GPU, keep the node's ``CUDA_VISIBLE_DEVICES``
        (``RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES``) and get their share as
        ``fraction_of_gpus``; the other workers of such an engine (no ``bundle_indices``) too."""
        resources: dict[str, Any] = {"num_gpus": num_gpus}
        env_vars: dict[str, str] = {}
        init_kwargs: dict[str, Any] = {}
        local = None
        if bundle_indices is not None:
            node, local = bundle_indices[0], list(bundle_indices[1])
            seed = node * SEED_STRIDE + local[0] // len(local)
            init_kwargs.update(bundle_indices=local, seed=seed)
            env_vars["VLLM_CACHE_ROOT"] = os.path.expanduser(f"~/.cache/vllm_{seed}")
            env_vars["VLLM_PORT"] = str(vllm_port(local, num_gpus_per_node))
        if local is None or len(local) > 1:
            resources["num_gpus"] = 0
            env_vars["RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES"] = "1"
            init_kwargs["fraction_of_gpus"] = num_gpus
        env_vars["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
        env_vars["VLLM_SKIP_P2P_CHECK"] = "1"  # the driver reports peer-to-peer capability
        return resources, env_vars, init_kwargs, {}
