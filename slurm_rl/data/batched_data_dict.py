"""BatchedDataDict: a dict of equally long columns (tensors or lists) that shards, slices and
micro-batches itself for dispatch to worker groups. Name for name with NeMo RL's class."""

from __future__ import annotations

from collections import UserDict
from collections.abc import Iterator, Sequence
from typing import Any, Generic, TypeVar

import torch

from ..core.errors import SlurmRlError
from .batch_merge import batch_size, merge_batches
from .batch_plans import (
    DynamicBatchingArgs,
    Ranges,
    SequencePackingArgs,
    length_of,
    length_sorted_order,
    micro_batches,
    packed_plan,
    take,
)
from .media_sharing import multimodal_columns, repeated
from .multimodal_utils import PackedTensor

T = TypeVar("T")


class ShardingError(SlurmRlError, ValueError, AssertionError):
    """Sizes that cannot be sharded as asked. Both a ValueError and an AssertionError: NeMo RL
    asserts here, so callers catch either; the message names the sizes."""


class BatchedDataDict(UserDict, Generic[T]):
    """Columns of equal length; row i is ``{k: v[i]}``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # per global batch (chunk) of a shard: its micro-batches' row ranges and token lengths
        # (dynamic batching: the padded width; sequence packing: the packed token count)
        self.micro_batch_indices: list[Ranges] | None = None
        self.micro_batch_lengths: list[list[int]] | None = None
        self.elem_counts_per_gb: list[int] | None = None  # a shard's rows per global batch (chunk)

    @property
    def size(self) -> int:
        """Length of the first column, 0 if empty (``from_batches`` sizes a batch the same way)."""
        return batch_size(self.data)

    def _check_lengths(self) -> None:
        lengths = {k: length_of(v) for k, v in self.data.items()}
        if len(set(lengths.values())) > 1:
            sizes = ",".join(str(n) for n in sorted(set(lengths.values())))
            raise ShardingError(
                f"Batch sizes are not the same across the rollout batch, found sizes: [{sizes}] (columns: {lengths})"
            )

    def get_dict(self) -> dict[str, Any]:
        return dict(self.data)

    def _new(self, data: dict[str, Any], cls: type | None = None) -> Any:
        return (cls or type(self))(data)

    @classmethod
    def from_batches(
        cls,
        batches: Sequence[dict[str, Any]],
        pad_value_dict: dict[str, Any] | None = None,
        allow_missing_packed_tensors: bool = False,
    ) -> Any:
        """Concatenate batches column by column (see ``batch_merge``): lists joined, tensors
        concatenated (2-D+ right-padded along dim 1, pad value per key, default 0),
        PackedTensors concatenated keeping shared media shared."""
        return cls(merge_batches(batches, pad_value_dict, allow_missing_packed_tensors))

    # ---- selection ---------------------------------------------------------------------------
    def select_indices(self, indices: Sequence[int] | torch.Tensor) -> Any:
        idx = indices.tolist() if isinstance(indices, torch.Tensor) else list(indices)
        return self._new({k: take(v, idx) for k, v in self.data.items()})

    def reorder_data(self, reorded_indices: Sequence[int] | torch.Tensor) -> None:
        """Move rows in place: row i goes to position ``reorded_indices[i]`` (NeMo RL's rule).
        Given the ``sorted_indices`` that sharding with dynamic batching or sequence packing
        returned, the concatenated shards (``from_batches``) come back in their original order."""
        idx = reorded_indices.tolist() if isinstance(reorded_indices, torch.Tensor) else list(reorded_indices)
        if sorted(idx) != list(range(self.size)):
            raise ValueError(f"reorder_data needs a permutation of 0..{self.size - 1}")
        source = sorted(range(len(idx)), key=lambda i: idx[i])  # new row j is old row source[j]
        for k, v in self.data.items():
            self.data[k] = take(v, source)

    def slice(self, start: int, end: int) -> SlicedDataDict:
        return SlicedDataDict({k: v[start:end] for k, v in self.data.items()})

    def chunk(self, rank: int, chunks: int) -> SlicedDataDict:
        """The ``rank``-th of ``chunks`` contiguous, equal parts (the last ones one shorter when
        the size does not divide)."""
        if not 0 <= rank < chunks:
            raise ValueError(f"chunk: rank {rank} is not in 0..{chunks - 1}")
        base, extra = divmod(self.size, chunks)
        start = rank * base + min(rank, extra)
        return self.slice(start, start + base + (1 if rank < extra else 0))

    def get_batch(self, batch_idx: int, batch_size: int | None = None) -> SlicedDataDict:
        """Global batch ``batch_idx`` of a shard: the rows of that chunk's micro-batches when the
        shard has them (its micro-batches come along, renumbered from 0), else rows
        ``batch_idx * batch_size`` up to the next multiple."""
        if self.micro_batch_indices is not None and self.micro_batch_lengths is not None:
            ranges = self.micro_batch_indices[batch_idx]
            start = ranges[0][0] if ranges else 0
            end = ranges[-1][1] if ranges else 0
            batch = self.slice(start, end)
            batch.micro_batch_indices = [[[a - start, b - start] for a, b in ranges]]
            batch.micro_batch_lengths = [list(self.micro_batch_lengths[batch_idx])]
            return batch
        if batch_size is None:
            raise ValueError("get_batch: batch_size is needed for a batch without micro-batches")
        return self.slice(batch_idx * batch_size, (batch_idx + 1) * batch_size)

    def repeat_interleave(self, num_repeats: int, *, share_immutable_media: bool = False) -> Any:
        """Every row ``num_repeats`` times in a row: tensors repeated, list items deep-copied;
        with ``share_immutable_media`` the repeats share their media (see ``media_sharing``)."""
        return self._new({k: repeated(k, v, num_repeats, share_immutable_media) for k, v in self.data.items()})

    def truncate_tensors(self, dim: int, truncated_len: int) -> None:
        for k, v in self.data.items():
            if isinstance(v, torch.Tensor) and v.dim() > dim:
                self.data[k] = v.narrow(dim, 0, min(truncated_len, v.shape[dim]))

    # ---- sharding ----------------------------------------------------------------------------
    def shard_by_batch_size(
        self,
        shards: int,
        batch_size: int | None = None,
        allow_uneven_shards: bool = False,
        dynamic_batching_args: DynamicBatchingArgs | None = None,
        sequence_packing_args: SequencePackingArgs | None = None,
    ) -> Any:
        """Cut into chunks of ``batch_size`` (all if None), each chunk into ``shards`` parts;
        shard i gets the i-th part of every chunk. With dynamic batching or sequence packing,
        returns ``(shards, sorted_indices)``: each shard's ``micro_batch_indices`` /
        ``micro_batch_lengths`` per chunk, and the original row of every row of the shards
        concatenated (``reorder_data(sorted_indices)`` restores the order)."""
        if dynamic_batching_args is not None and sequence_packing_args is not None:
            raise ShardingError("dynamic_batching_args and sequence_packing_args cannot be passed together")
        self._check_lengths()
        total = self.size
        bs = total if batch_size is None else batch_size
        if shards < 1:
            raise ShardingError(f"shard_by_batch_size: shards must be >= 1, got {shards}")
        if bs < 1 or total % bs != 0:
            raise ShardingError(f"Total batch size ({total}) is not a multiple of batch_size ({bs})")
        if bs % shards != 0 and not allow_uneven_shards:
            raise ShardingError(
                f"Batch size ({bs}) is not a multiple of shards ({shards}); "
                f"pass allow_uneven_shards=True or change the sizes"
            )
        if (dynamic_batching_args is not None or sequence_packing_args is not None) and allow_uneven_shards:
            raise ShardingError("shard_by_batch_size: dynamic batching and sequence packing need even shards")
        if sequence_packing_args is not None:
            return self._shard_packed(shards, bs, sequence_packing_args)
        per = -(-bs // shards)  # ceil: uneven shards put the shortfall on the last ones
        shard_rows: list[list[int]] = [[] for _ in range(shards)]
        order = list(range(total))
        if dynamic_batching_args is not None:
            order = self._length_sorted_order(bs, shards, dynamic_batching_args)
        for c in range(total // bs):
            chunk_rows = order[c * bs : (c + 1) * bs]
            for i in range(shards):
                shard_rows[i].extend(chunk_rows[i * per : (i + 1) * per])
        out = [SlicedDataDict(self.select_indices(rows).data) for rows in shard_rows]
        for i, s in enumerate(out):
            s.elem_counts_per_gb = [
                len(order[c * bs : (c + 1) * bs][i * per : (i + 1) * per]) for c in range(total // bs)
            ]
        if dynamic_batching_args is None:
            return out
        for s in out:
            s._compute_micro_batches(dynamic_batching_args, per)
        sorted_indices = [i for rows in shard_rows for i in rows]
        return out, sorted_indices

    def _lengths(self, key: str) -> list[int]:
        lengths = self.data[key]
        return [int(n) for n in (lengths.tolist() if isinstance(lengths, torch.Tensor) else lengths)]

    def _shard_packed(self, shards: int, bs: int, args: SequencePackingArgs) -> tuple[list[SlicedDataDict], list[int]]:
        """Sequence packing's shards (see batch_plans.packed_plan) and the rows' original order."""
        lens = self._lengths(args["input_lengths_key"])
        shard_rows, ranges, tokens = packed_plan(lens, self.size, bs, shards, args)
        out = []
        for s in range(shards):
            shard = SlicedDataDict(self.select_indices(shard_rows[s]).data)
            shard.micro_batch_indices, shard.micro_batch_lengths = ranges[s], tokens[s]
            shard.elem_counts_per_gb = [r[-1][1] - r[0][0] if r else 0 for r in ranges[s]]
            out.append(shard)
        return out, [i for rows in shard_rows for i in rows]

    def _length_sorted_order(self, bs: int, shards: int, args: DynamicBatchingArgs) -> list[int]:
        return length_sorted_order(self._lengths(args["input_lengths_key"]), self.size, bs, shards)

    def _compute_micro_batches(self, args: DynamicBatchingArgs, rows_per_chunk: int) -> None:
        lens = self._lengths(args["input_lengths_key"])
        self.micro_batch_indices, self.micro_batch_lengths = micro_batches(lens, args, rows_per_chunk)

    # ---- iteration ---------------------------------------------------------------------------
    def make_microbatch_iterator(self, microbatch_size: int) -> Iterator[SlicedDataDict]:
        if microbatch_size < 1:
            raise ValueError("make_microbatch_iterator: microbatch_size must be >= 1")
        for start in range(0, self.size, microbatch_size):
            yield self.slice(start, start + microbatch_size)

    def _micro_batches(self, what: str) -> Iterator[tuple[int, int, int]]:
        if self.micro_batch_indices is None or self.micro_batch_lengths is None:
            raise ValueError(f"no micro-batches recorded: shard with {what} first")
        for ranges, lengths in zip(self.micro_batch_indices, self.micro_batch_lengths):
            for (start, end), length in zip(ranges, lengths):
                yield start, end, length

    def make_microbatch_iterator_with_dynamic_shapes(self) -> Iterator[SlicedDataDict]:
        """Each micro-batch of dynamic batching, its 2-D+ tensors cut to the micro-batch's width."""
        for start, end, width in self._micro_batches("dynamic_batching_args"):
            mb = self.slice(start, end)
            for k, v in mb.data.items():
                if isinstance(v, torch.Tensor) and v.dim() >= 2 and v.shape[1] > width:
                    mb.data[k] = v[:, :width]
            yield mb

    def make_microbatch_iterator_for_packable_sequences(self) -> Iterator[SlicedDataDict]:
        """Each packed micro-batch: the rows whose sequences share it (the model packs them)."""
        for start, end, _ in self._micro_batches("sequence_packing_args"):
            yield self.slice(start, end)

    def get_microbatch_iterator_dynamic_shapeslength_of(self) -> int:
        return sum(1 for _ in self._micro_batches("dynamic_batching_args"))

    def get_microbatch_iterator_for_packable_sequenceslength_of(self) -> tuple[int, int]:
        """(number of packed micro-batches, the most tokens in one)."""
        lengths = [length for _, _, length in self._micro_batches("sequence_packing_args")]
        return len(lengths), max(lengths, default=0)

    def get_multimodal_dict(
        self,
        as_tensors: bool = False,
        device: str | torch.device | None = None,
        pixel_dtype: torch.dtype | None = None,
    ) -> dict[str, Any]:
        """The columns a multimodal model takes: every PackedTensor (one tensor each with
        ``as_tensors``; ``pixel_values*`` cast to ``pixel_dtype``) and the extra keys it expects
        beside them (``token_type_ids``, ...)."""
        return multimodal_columns(self.data, as_tensors, device, pixel_dtype)

    def to(self, device: str | torch.device) -> Any:
        for k, v in self.data.items():
            if isinstance(v, (torch.Tensor, PackedTensor)):
                self.data[k] = v.to(device)
        return self

    to_device = to

    def all_gather(self, group: Any = None) -> Any:
        """Every rank's batch, concatenated in rank order, over a torch.distributed group."""
        import torch.distributed as dist

        world = dist.get_world_size(group)
        gathered: list[Any] = [None] * world
        dist.all_gather_object(
            gathered, {k: (v.cpu() if isinstance(v, torch.Tensor) else v) for k, v in self.data.items()}, group=group
        )
        return type(self).from_batches(gathered)


class SlicedDataDict(BatchedDataDict):
    """A part of a BatchedDataDict meant for one worker (what dispatch hands out)."""
