"""NeMo RL 2026's ``nemo_rl.data.multimodal_utils.PackedTensor``: a batch column whose rows are
tensors of different shapes (one image's patches, a video's frames), kept as a list and packed
into one tensor only when a model needs it.

A row may be ``None`` (a sample without media). ``as_tensor`` concatenates the rows' tensors along
``dim_to_pack`` (with ``pad_to_max_shape``, the other dimensions are first zero-padded to the
largest). In a ``BatchedDataDict`` a PackedTensor column is sliced, reordered, sharded, repeated,
concatenated and moved like any other column, row by row. NeMo RL's segment de-duplication (one
physical tensor shared by several rows) is not implemented: every row holds its own tensor.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch


class PackedTensor:
    def __init__(
        self,
        tensors: torch.Tensor | Sequence[torch.Tensor | None],
        dim_to_pack: int = 0,
        pad_to_max_shape: bool = False,
    ) -> None:
        if tensors is None:
            raise ValueError("PackedTensor: tensors cannot be None (give a tensor or a list of them)")
        if isinstance(tensors, torch.Tensor):
            self.tensors: list[torch.Tensor | None] = [tensors]
        elif isinstance(tensors, (list, tuple)):
            bad = [type(t).__name__ for t in tensors if t is not None and not isinstance(t, torch.Tensor)]
            if bad:
                raise ValueError(f"PackedTensor: rows must be tensors or None, got {bad[0]}")
            self.tensors = list(tensors)
        else:
            raise ValueError(f"Unsupported type for input tensors to PackedTensor: {type(tensors)}")
        self.dim_to_pack = dim_to_pack
        self.pad_to_max_shape = pad_to_max_shape

    def __len__(self) -> int:
        return len(self.tensors)

    def __getitem__(self, index: int | slice) -> Any:
        if isinstance(index, slice):
            return PackedTensor(self.tensors[index], self.dim_to_pack, self.pad_to_max_shape)
        return self.tensors[index]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, PackedTensor):
            return NotImplemented
        if (self.dim_to_pack, self.pad_to_max_shape, len(self)) != (
            other.dim_to_pack,
            other.pad_to_max_shape,
            len(other),
        ):
            return False
        return all(
            (a is None and b is None) or (a is not None and b is not None and torch.equal(a, b))
            for a, b in zip(self.tensors, other.tensors)
        )

    def __repr__(self) -> str:
        shapes = [None if t is None else tuple(t.shape) for t in self.tensors]
        return f"PackedTensor(rows={shapes}, dim_to_pack={self.dim_to_pack})"

    def as_tensor(self, device: str | torch.device | None = None) -> torch.Tensor | None:
        """The rows' tensors concatenated along ``dim_to_pack`` (None rows skipped); None when
        every row is None."""
        rows = [t for t in self.tensors if t is not None]
        if not rows:
            return None
        if self.pad_to_max_shape:
            rows = _padded_to_max(rows, self.dim_to_pack)
        packed = torch.cat(rows, dim=self.dim_to_pack)
        return packed.to(device) if device is not None else packed

    def to(self, device: str | torch.device) -> PackedTensor:
        self.tensors = [t.to(device) if t is not None else None for t in self.tensors]
        return self

    def to_dtype(self, dtype: torch.dtype) -> PackedTensor:
        """A new PackedTensor with floating-point rows cast (integer rows, e.g. grid sizes, kept)."""
        rows = [t.to(dtype=dtype) if t is not None and t.is_floating_point() else t for t in self.tensors]
        return PackedTensor(rows, self.dim_to_pack, self.pad_to_max_shape)

    def slice(self, indices: Sequence[int] | torch.Tensor) -> PackedTensor:
        idx = indices.tolist() if isinstance(indices, torch.Tensor) else list(indices)
        for i in idx:
            if not -len(self) <= i < len(self):
                raise IndexError(f"PackedTensor row index {i} is out of range")
        return PackedTensor([self.tensors[i] for i in idx], self.dim_to_pack, self.pad_to_max_shape)

    @classmethod
    def _same_layout(cls, packed: Sequence[PackedTensor]) -> tuple[int, bool]:
        dims = {p.dim_to_pack for p in packed}
        if len(dims) != 1:
            raise AssertionError("All packed tensors must have the same dim_to_pack")
        pads = {p.pad_to_max_shape for p in packed}
        if len(pads) != 1:
            raise AssertionError("All packed tensors must have the same pad_to_max_shape setting")
        return dims.pop(), pads.pop()

    @classmethod
    def concat(cls, from_packed_tensors: Sequence[PackedTensor]) -> PackedTensor:
        """Rows of all of them, in order (one row per row)."""
        dim, pad = cls._same_layout(from_packed_tensors)
        return cls([t for p in from_packed_tensors for t in p.tensors], dim, pad)

    @classmethod
    def flattened_concat(cls, from_packed_tensors: Sequence[PackedTensor]) -> PackedTensor:
        """One row per input, each input packed first (``as_tensor``)."""
        dim, pad = cls._same_layout(from_packed_tensors)
        return cls([p.as_tensor() for p in from_packed_tensors], dim, pad)

    @classmethod
    def empty_like(cls, other: PackedTensor) -> PackedTensor:
        return cls.empty_rows_like(other, len(other))

    @classmethod
    def empty_rows_like(cls, other: PackedTensor, num_rows: int) -> PackedTensor:
        if num_rows < 0:
            raise ValueError("num_rows must be non-negative")
        return cls([None] * num_rows, other.dim_to_pack, other.pad_to_max_shape)


PackedMultimodalData = PackedTensor  # its earlier name


def _padded_to_max(rows: list[torch.Tensor], dim: int) -> list[torch.Tensor]:
    ndim = rows[0].dim()
    if any(r.dim() != ndim for r in rows):
        raise ValueError("PackedTensor(pad_to_max_shape=True): every row needs the same number of dimensions")
    dim = dim % ndim
    widest = [max(r.shape[d] for r in rows) for d in range(ndim)]
    out = []
    for r in rows:
        pad: list[int] = []
        for d in reversed(range(ndim)):  # F.pad takes (last dim's left, right, ..., first dim's)
            pad += [0, 0 if d == dim else widest[d] - r.shape[d]]
        out.append(torch.nn.functional.pad(r, pad))
    return out
