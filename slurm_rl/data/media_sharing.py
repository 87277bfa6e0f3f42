"""Media a batch holds once however often its rows repeat, and what a multimodal model is
handed (NeMo RL 2026's ``repeat_interleave(..., share_immutable_media=True)`` and
``get_multimodal_dict``).

GRPO repeats each prompt G times. Without sharing every repeat deep-copies the prompt, its
images included: G copies in the driver's memory and on the wire. With sharing, the repeats are
separate rows (their message dicts and lists are their own, and may be edited) whose media are
the same objects: PackedTensors inside a row become de-duplicated ones sharing their physical
tensors, and the image, video and audio arrays of the ``vllm_*`` columns are shared as they are.
Nothing shared is ever written in place by slurm-rl."""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from typing import Any

import torch

from .multimodal_utils import SHARE_MEDIA, PackedTensor

MEDIA_KEYS = ("vllm_images", "vllm_videos", "vllm_audios")  # columns of native media (tensors, arrays)
# PackedTensor columns whose rows must line up segment by segment (an image and its size)
COUPLED_MEDIA = (
    ("pixel_values", "imgs_sizes", "image_sizes", "image_grid_thw"),
    ("pixel_values_videos", "video_grid_thw"),
)
# Keys a multimodal model takes beside its PackedTensor columns
MULTIMODAL_EXTRA_KEYS = ("token_type_ids", "image_grid_thw", "video_grid_thw", "image_sizes", "pixel_attention_mask")


def _leaves(value: Any) -> Iterator[Any]:
    if isinstance(value, (list, tuple)):
        for v in value:
            yield from _leaves(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _leaves(v)
    elif isinstance(value, torch.Tensor) or type(value).__module__ == "numpy":
        yield value


def repeated(key: str, value: Any, num_repeats: int, share_immutable_media: bool = False) -> Any:
    """One column with every row ``num_repeats`` times in a row."""
    if isinstance(value, PackedTensor):
        raise NotImplementedError(
            f"PackedTensor does not currently support repeat_interleave (column {key!r}): keep the media "
            "inside the rows (a message_log) or repeat before packing"
        )
    if isinstance(value, torch.Tensor):
        return value.repeat_interleave(num_repeats, dim=0)
    out = []
    for item in value:
        if not share_immutable_media:
            out += [copy.deepcopy(item) for _ in range(num_repeats)]
            continue
        seed: dict[Any, Any] = {SHARE_MEDIA: {}}  # one set of origins for the repeats of this row
        if key in MEDIA_KEYS:
            seed.update((id(leaf), leaf) for leaf in _leaves(item))
        out += [copy.deepcopy(item, dict(seed)) for _ in range(num_repeats)]
    return out


def check_coupled(columns: Mapping[str, Any]) -> None:
    """De-duplicated media columns that belong together (pixels and sizes) must give each row
    the same number of segments, in order: a model pairs them segment by segment."""
    for group in COUPLED_MEDIA:
        present = [k for k in group if isinstance(columns.get(k), PackedTensor) and columns[k].deduplication_enabled]
        counts = {k: columns[k].logical_segment_counts_by_row() for k in present}
        for k in present[1:]:
            if counts[k] != counts[present[0]]:
                raise ValueError(
                    f"get_multimodal_dict: {present[0]!r} and {k!r} need the same ordered per-row segment "
                    f"counts, got {counts[present[0]]} and {counts[k]}"
                )


def multimodal_columns(
    columns: Mapping[str, Any],
    as_tensors: bool = False,
    device: str | torch.device | None = None,
    pixel_dtype: torch.dtype | None = None,
) -> dict[str, Any]:
    """Every PackedTensor column (as one tensor with ``as_tensors``; the ``pixel_values*`` ones
    cast to ``pixel_dtype`` without undoing their sharing) and the extra keys a model expects."""
    if as_tensors:
        check_coupled(columns)
    out: dict[str, Any] = {}
    for k, v in columns.items():
        if isinstance(v, PackedTensor):
            if pixel_dtype is not None and k.startswith("pixel_values"):
                v = v.to_dtype(pixel_dtype)
            out[k] = v.as_tensor(device) if as_tensors else v
        elif k in MULTIMODAL_EXTRA_KEYS:
            out[k] = v.to(device) if device is not None and isinstance(v, torch.Tensor) else v
    return out
