"""NeMo RL's ``nemo_rl.utils.nsys``: reading ``NRL_NSYS_EXTRA_OPTIONS``, the extra Nsight Systems
flags (a JSON object, e.g. ``{"cuda-memory-usage": "true"}``) added to a profiled worker's
``nsight`` runtime_env."""

from __future__ import annotations

import json
from typing import Any


def _parse_extra_options(raw: str) -> dict[str, Any]:
    """``{}`` for an empty value, else the JSON object; ValueError naming the variable otherwise."""
    if not raw.strip():
        return {}
    try:
        extra = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ValueError(
            f'Failed to parse NRL_NSYS_EXTRA_OPTIONS as JSON ({exc}); write e.g. \'{{"cuda-memory-usage": "true"}}\''
        ) from None
    if not isinstance(extra, dict):
        raise ValueError(f"NRL_NSYS_EXTRA_OPTIONS must be a JSON object, got {type(extra).__name__}")
    return extra
