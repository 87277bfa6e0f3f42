"""``BatchedDataDict.from_batches``: batches concatenated column by column, as NeMo RL 2026 does
it. A batch's size is its first column's length (no other column is measured: metadata columns
need not have one). Empty batches (size 0, or no columns) may lack optional keys (a generation
batch without ``routed_experts``); every non-empty batch must have every key, except, with
``allow_missing_packed_tensors``, PackedTensor media a batch does not carry (an audio batch
beside an image batch), which get empty rows, after each batch's columns are checked to agree
on its row count."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

from .batch_plans import length_of
from .multimodal_utils import PackedTensor


def batch_size(batch: Mapping[str, Any]) -> int:
    """The first column's length (0 for no columns)."""
    return length_of(next(iter(batch.values()))) if batch else 0


def _checked_rows(i: int, batch: Mapping[str, Any]) -> int:
    counts = {k: length_of(v) for k, v in batch.items()}
    if len(set(counts.values())) > 1:
        raise ValueError(f"from_batches: batch {i} has inconsistent logical row counts: {counts}")
    return next(iter(counts.values()), 0)


def merge_batches(
    batches: Sequence[Mapping[str, Any]],
    pad_value_dict: Mapping[str, Any] | None = None,
    allow_missing_packed_tensors: bool = False,
) -> dict[str, Any]:
    """Columns of all batches concatenated: lists joined, PackedTensors concatenated (shared
    segments stay shared), 1-D tensors concatenated, 2-D+ tensors right-padded along dim 1 to
    the longest first (pad value per key, default 0)."""
    if not batches:
        return {}
    sizes = [_checked_rows(i, b) if allow_missing_packed_tensors else batch_size(b) for i, b in enumerate(batches)]
    used = [b for b, n in zip(batches, sizes) if n > 0] or [b for b in batches if b][:1] or list(batches[:1])
    keys: list[str] = []
    for b in used:
        keys += [k for k in b if k not in keys]
    templates = {k: v for b in used for k, v in b.items() if isinstance(v, PackedTensor)}
    columns: dict[str, list[Any]] = {k: [] for k in keys}
    for i, b in enumerate(used):
        for k in keys:
            if k in b:
                columns[k].append(b[k])
            elif allow_missing_packed_tensors and k in templates:
                columns[k].append(PackedTensor.empty_rows_like(templates[k], batch_size(b)))
            else:
                have = [j for j, other in enumerate(used) if k in other]
                raise KeyError(
                    f"from_batches: key {k!r} is in non-empty batches {have} but missing from non-empty "
                    f"batch {i}; every non-empty batch needs the same keys"
                    + ("" if allow_missing_packed_tensors else " (allow_missing_packed_tensors=True fills media)")
                )
    pad = pad_value_dict or {}
    return {k: _concat(values, pad.get(k, 0)) for k, values in columns.items()}


def _concat(values: list[Any], pad_value: Any) -> Any:
    if all(isinstance(v, PackedTensor) for v in values):
        return PackedTensor.concat(values)
    if all(isinstance(v, torch.Tensor) for v in values):
        if values[0].dim() >= 2:
            width = max(v.shape[1] for v in values)
            values = [
                torch.nn.functional.pad(v, (0, 0) * (v.dim() - 2) + (0, width - v.shape[1]), value=pad_value)
                for v in values
            ]
        return torch.cat(values, dim=0)
    return [item for v in values for item in (v.tolist() if isinstance(v, torch.Tensor) else v)]
