"""NeMo RL 2026's ``nemo_rl.distributed.worker_group_utils``: how a worker's Ray options and
environment are put together from layers.

- ``recursive_merge_options(default, extra)``: a new dict, ``extra`` wins; dicts merge key by
  key at every depth, anything else (lists, scalars, a dict against a scalar) is replaced whole;
  neither input is changed. A top-level ``runtime_env`` whose defaults name Nsight as
  ``_nsight`` (Ray's runtime_env spells the field ``nsight``) is renamed before the merge, so the
  caller's ``nsight`` overrides it.
- ``merge_env_vars_with_process_env(env_vars)``: this process's environment with ``env_vars``
  on top, as a new dict (what a worker started from here should see).
- ``get_nsight_config_if_pattern_matches(worker_name)``: ``{"nsight": {...}}`` when the worker
  name matches one of the comma-separated shell patterns in ``NRL_NSYS_WORKER_PATTERNS`` (with
  ``NRL_NSYS_PROFILE_STEP_RANGE``; ``NRL_NSYS_EXTRA_OPTIONS``, JSON, adds or overrides flags),
  else ``{}``. The profile is recorded only where the worker calls the CUDA profiler API.
"""

from __future__ import annotations

import copy
import fnmatch
import logging
import os
from collections.abc import Mapping
from typing import Any

from .worker_env.nsys import _parse_extra_options

logger = logging.getLogger(__name__)

# NeMo RL reads these once, at import; a test or a launcher may set the module values. An
# environment variable set later (while the driver runs) wins over the module's value.
NRL_NSYS_WORKER_PATTERNS = os.environ.get("NRL_NSYS_WORKER_PATTERNS", "")
NRL_NSYS_PROFILE_STEP_RANGE = os.environ.get("NRL_NSYS_PROFILE_STEP_RANGE", "")
try:
    NRL_NSYS_EXTRA_OPTIONS: dict[str, Any] = _parse_extra_options(os.environ.get("NRL_NSYS_EXTRA_OPTIONS", ""))
except ValueError:  # said when a worker would be profiled, not when this module is imported
    NRL_NSYS_EXTRA_OPTIONS = {}


def _merge_into(base: dict[str, Any], incoming: Mapping[str, Any]) -> None:
    for key, value in incoming.items():
        if isinstance(value, Mapping) and isinstance(base.get(key), dict):
            _merge_into(base[key], value)
        else:
            base[key] = copy.deepcopy(value)


def recursive_merge_options(default_options: Mapping[str, Any], extra_options: Mapping[str, Any]) -> dict[str, Any]:
    merged = copy.deepcopy(dict(default_options))
    runtime_env = merged.get("runtime_env")
    if isinstance(runtime_env, dict) and "_nsight" in runtime_env and "nsight" not in runtime_env:
        runtime_env["nsight"] = runtime_env.pop("_nsight")
    _merge_into(merged, extra_options)
    return merged


def merge_env_vars_with_process_env(env_vars: Mapping[str, str] | None) -> dict[str, str]:
    return {**os.environ, **(env_vars or {})}


def get_nsight_config_if_pattern_matches(worker_name: str) -> dict[str, Any]:
    patterns_env = os.environ.get("NRL_NSYS_WORKER_PATTERNS", NRL_NSYS_WORKER_PATTERNS)
    steps = os.environ.get("NRL_NSYS_PROFILE_STEP_RANGE", NRL_NSYS_PROFILE_STEP_RANGE)
    if bool(patterns_env) != bool(steps):
        raise ValueError(
            "set both NRL_NSYS_WORKER_PATTERNS (worker name patterns, e.g. 'policy*') and "
            "NRL_NSYS_PROFILE_STEP_RANGE (e.g. '3:5'), or neither"
        )
    for pattern in filter(None, (p.strip() for p in patterns_env.split(","))):
        if fnmatch.fnmatch(worker_name, pattern):
            logger.info("Nsight profiling of worker %r (pattern %r)", worker_name, pattern)
            config: dict[str, Any] = {
                "t": "cuda,nvtx",
                "o": f"'{worker_name}_{steps}_%p'",
                "stop-on-exit": "true",
                "s": "none",
                "capture-range": "cudaProfilerApi",
                "capture-range-end": "stop",
                "cuda-graph-trace": "node",
            }
            raw = os.environ.get("NRL_NSYS_EXTRA_OPTIONS")
            config.update(_parse_extra_options(raw) if raw is not None else NRL_NSYS_EXTRA_OPTIONS)
            return {"nsight": config}
    return {}
