"""The options model as the command line sees it: which fields are flags and how each is spelled
(the spec's site defaults: config/site_defaults.py). commands/common.py makes the click options
from these; resolve.py names a failed check by its flag."""

from __future__ import annotations

from typing import Any

from ...core.options import JobOptions


def flag_fields() -> dict[str, dict[str, Any]]:
    """Field name -> its flag metadata, for every option that is a command-line flag."""
    out = {}
    for name, info in JobOptions.model_fields.items():
        extra = info.json_schema_extra
        if isinstance(extra, dict) and extra.get("flags"):
            out[name] = {**extra, "default": info.default}
    return out


def flag_of(field: str) -> str:
    """How the user spells a field: its long flag, else the field name."""
    meta = flag_fields().get(field)
    return str(meta["flags"][-1]) if meta else field
