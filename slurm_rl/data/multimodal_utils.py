"""NeMo RL 2026's ``nemo_rl.data.multimodal_utils.PackedTensor``: a batch column whose rows are
tensors of different shapes (one image's patches, a video's frames), kept as a list and packed
into one tensor only when a model needs it.

Two layouts. Plain: row i is ``tensors[i]``, or None for a sample without media. Segmented
(after ``enable_deduplication()``, or from ``merge_segments``): a row is a run of segments, each
an index into ``tensors`` (``_row_offsets`` delimit the runs in ``_segment_indices``), so one
physical tensor can serve many rows: the G repeats of a prompt share its image instead of
holding G copies. ``_segment_provenance`` names each physical tensor's origin; ``concat`` keeps
one physical tensor per origin, and ``slice`` keeps only the tensors its rows use ("re-interned"),
so a shard carries each image once. ``as_tensor`` materializes every row's segments in order
(duplicates included: that is what the model sees). In a ``BatchedDataDict`` a PackedTensor
column is sliced, reordered, sharded, concatenated and moved like any other column, row by row.
"""

from __future__ import annotations

import copy
import uuid
from collections.abc import Sequence
from typing import Any

import torch

SHARE_MEDIA = "__slurm_rl_share_media__"  # a deepcopy memo key: share physical tensors (see media_sharing)


def _origin() -> str:
    return uuid.uuid4().hex  # unique across processes: shards travel between them


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
        self._row_offsets: list[int] | None = None  # segmented layout: row r is segments [o[r], o[r+1])
        self._segment_indices: list[int] | None = None  # segment -> index into tensors
        self._segment_provenance: list[str] | None = None  # per physical tensor: its origin

    @classmethod
    def _segmented(
        cls, like: PackedTensor, tensors: list[Any], offsets: list[int], indices: list[int], origins: list[str] | None
    ) -> PackedTensor:
        out = cls(tensors, like.dim_to_pack, like.pad_to_max_shape)
        out._row_offsets, out._segment_indices, out._segment_provenance = offsets, indices, origins
        return out

    # ---- rows ------------------------------------------------------------------------------------
    @property
    def deduplication_enabled(self) -> bool:
        return self._segment_provenance is not None

    def __len__(self) -> int:
        return len(self.tensors) if self._row_offsets is None else len(self._row_offsets) - 1

    def _row(self, r: int) -> list[int]:
        """Row r's segments as indices into ``tensors``."""
        if self._row_offsets is None or self._segment_indices is None:
            return [] if self.tensors[r] is None else [r]
        return self._segment_indices[self._row_offsets[r] : self._row_offsets[r + 1]]

    def logical_segment_counts_by_row(self) -> list[int]:
        return [len(self._row(r)) for r in range(len(self))]

    def __getitem__(self, index: int | slice) -> Any:
        if isinstance(index, slice):
            return self.slice(range(len(self))[index])
        segments = [self.tensors[i] for i in self._row(range(len(self))[index])]
        return None if not segments else segments[0] if len(segments) == 1 else torch.cat(segments, self.dim_to_pack)  # type: ignore[arg-type]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, PackedTensor):
            return NotImplemented
        if (self.dim_to_pack, self.pad_to_max_shape, len(self)) != (
            other.dim_to_pack,
            other.pad_to_max_shape,
            len(other),
        ):
            return False
        return all(_same(self[r], other[r]) for r in range(len(self)))

    def __repr__(self) -> str:
        shapes = [tuple(t.shape) if t is not None else None for t in self.tensors]
        shared = f", rows={len(self)}, shared" if self.deduplication_enabled else ""
        return f"PackedTensor(tensors={shapes}, dim_to_pack={self.dim_to_pack}{shared})"

    def as_tensor(self, device: str | torch.device | None = None) -> torch.Tensor | None:
        """Every row's segments concatenated along ``dim_to_pack``, in row order (None rows
        skipped); None when there is none."""
        rows = [t for r in range(len(self)) for i in self._row(r) if (t := self.tensors[i]) is not None]
        if not rows:
            return None
        if self.pad_to_max_shape:
            rows = _padded_to_max(rows, self.dim_to_pack)
        packed = torch.cat(rows, dim=self.dim_to_pack)
        return packed.to(device) if device is not None else packed

    # ---- sharing ---------------------------------------------------------------------------------
    def enable_deduplication(self) -> PackedTensor:
        """Segmented layout with an origin per physical tensor (one tensor object used by several
        rows stays one); returns self."""
        if self.deduplication_enabled:
            return self
        if self._row_offsets is None:
            physical: dict[int, int] = {}  # tensor object -> its index in the new tensors
            tensors: list[torch.Tensor | None] = []
            offsets, indices = [0], []
            for t in self.tensors:
                if t is not None:
                    if id(t) not in physical:
                        physical[id(t)] = len(tensors)
                        tensors.append(t)
                    indices.append(physical[id(t)])
                offsets.append(len(indices))
            self.tensors, self._row_offsets, self._segment_indices = tensors, offsets, indices
        self._segment_provenance = [_origin() for _ in self.tensors]
        return self

    def __deepcopy__(self, memo: dict[Any, Any]) -> PackedTensor:
        share = memo.get(SHARE_MEDIA)
        if share is None:  # an ordinary deep copy: the tensors too
            out = copy.copy(self)
            out.tensors = copy.deepcopy(self.tensors, memo)
            for name in ("_row_offsets", "_segment_indices", "_segment_provenance"):
                setattr(out, name, copy.copy(getattr(self, name)))
            return out
        template = share.get(id(self))  # the repeats of one value: one set of origins for all
        if template is None:
            template = share[id(self)] = (
                copy.copy(self).enable_deduplication() if not self.deduplication_enabled else self
            )
        clone = copy.copy(template)
        clone.tensors = list(template.tensors)
        return clone

    # ---- selection -------------------------------------------------------------------------------
    def slice(self, indices: Sequence[int] | torch.Tensor) -> PackedTensor:
        idx = indices.tolist() if isinstance(indices, torch.Tensor) else list(indices)
        for i in idx:
            if not -len(self) <= i < len(self):
                raise IndexError(f"PackedTensor row index {i} is out of range")
        if self._row_offsets is None:
            return PackedTensor([self.tensors[i] for i in idx], self.dim_to_pack, self.pad_to_max_shape)
        return self._rows_of([(self, i % len(self)) for i in idx])

    @classmethod
    def _rows_of(cls, rows: list[tuple[PackedTensor, int]], like: PackedTensor | None = None) -> PackedTensor:
        """A segmented PackedTensor of these (source, row) pairs, one physical tensor per origin
        (or per tensor object where a source has no origins)."""
        like = like or rows[0][0]
        tensors: list[Any] = []
        origins: list[str] = []
        seen: dict[Any, int] = {}
        offsets, indices = [0], []
        dedup = any(p.deduplication_enabled for p, _ in rows) or like.deduplication_enabled
        for p, r in rows:
            for i in p._row(r):
                key = p._segment_provenance[i] if p._segment_provenance is not None else ("object", id(p.tensors[i]))
                if key not in seen:
                    seen[key] = len(tensors)
                    tensors.append(p.tensors[i])
                    origins.append(key if isinstance(key, str) else _origin())
                indices.append(seen[key])
            offsets.append(len(indices))
        return cls._segmented(like, tensors, offsets, indices, origins if dedup else None)

    @classmethod
    def _same_layout(cls, packed: Sequence[PackedTensor]) -> tuple[int, bool]:
        if len({p.dim_to_pack for p in packed}) != 1:
            raise AssertionError("All packed tensors must have the same dim_to_pack")
        if len({p.pad_to_max_shape for p in packed}) != 1:
            raise AssertionError("All packed tensors must have the same pad_to_max_shape setting")
        return packed[0].dim_to_pack, packed[0].pad_to_max_shape

    @classmethod
    def concat(cls, from_packed_tensors: Sequence[PackedTensor]) -> PackedTensor:
        """Rows of all of them, in order; shared segments (same origin) stay one tensor."""
        dim, pad = cls._same_layout(from_packed_tensors)
        if all(p._row_offsets is None for p in from_packed_tensors):
            return cls([t for p in from_packed_tensors for t in p.tensors], dim, pad)
        rows = [(p, r) for p in from_packed_tensors for r in range(len(p))]
        return cls._rows_of(rows, like=from_packed_tensors[0])

    @classmethod
    def merge_segments(cls, from_packed_tensors: Sequence[PackedTensor]) -> PackedTensor:
        """One row holding every segment of all of them, in order."""
        cls._same_layout(from_packed_tensors)
        merged = cls.concat(from_packed_tensors)
        if merged._row_offsets is None:
            merged = cls._rows_of([(merged, r) for r in range(len(merged))], like=merged)
        merged._row_offsets = [0, len(merged._segment_indices or [])]
        return merged

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
        if other._row_offsets is None:
            return cls([None] * num_rows, other.dim_to_pack, other.pad_to_max_shape)
        return cls._segmented(other, [], [0] * (num_rows + 1), [], [] if other.deduplication_enabled else None)

    # ---- placement -------------------------------------------------------------------------------
    def to(self, device: str | torch.device) -> PackedTensor:
        self.tensors = [t.to(device) if t is not None else None for t in self.tensors]
        return self

    def to_dtype(self, dtype: torch.dtype) -> PackedTensor:
        """A new PackedTensor with floating-point tensors cast (integer ones, e.g. grid sizes,
        kept); the same rows and sharing, new origins (new physical data)."""
        out = copy.copy(self)
        out.tensors = [t.to(dtype=dtype) if t is not None and t.is_floating_point() else t for t in self.tensors]
        if self._segment_provenance is not None:
            out._segment_provenance = [_origin() for _ in out.tensors]
        return out


PackedMultimodalData = PackedTensor  # its earlier name


def _same(a: torch.Tensor | None, b: torch.Tensor | None) -> bool:
    return (a is None and b is None) or (a is not None and b is not None and torch.equal(a, b))


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
