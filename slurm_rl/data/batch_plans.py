"""How a batch is cut (the arithmetic behind ``BatchedDataDict.shard_by_batch_size``): the
argument types, rows dealt to shards by length (dynamic batching), micro-batches within a
token budget, and sequences packed into bins dealt evenly to shards (sequence packing). Pure
functions of row lengths; the data itself never passes through here."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypedDict

import torch
from typing_extensions import NotRequired

from .multimodal_utils import PackedTensor
from .sequence_packing import pack

Ranges = list[list[int]]  # [[start, end], ...] rows of one micro-batch each


class DynamicBatchingArgs(TypedDict):
    """Micro-batch by token budget: sequences sorted by length, padded to a multiple of
    ``sequence_length_round``, at most ``max_tokens_per_microbatch`` padded tokens each."""

    max_tokens_per_microbatch: int
    sequence_length_round: int
    input_key: str
    input_lengths_key: str


class SequencePackingArgs(TypedDict):
    """Pack sequences into micro-batches of at most ``max_tokens_per_microbatch`` tokens (each
    sequence's length from ``input_lengths_key``, rounded up to ``sequence_length_pad_multiple``)
    with ``algorithm``: "modified_first_fit_decreasing" (default), "first_fit_decreasing" or
    "concatenative" (in order)."""

    max_tokens_per_microbatch: int
    input_key: str
    input_lengths_key: str
    algorithm: NotRequired[str]
    sequence_length_pad_multiple: NotRequired[int]
    microbatch_order: NotRequired[str]  # "packer" (default: as packed) or "largest_first" (per shard)


MICROBATCH_ORDERS = (None, "packer", "largest_first")


def length_of(v: Any) -> int:
    return int(v.shape[0]) if isinstance(v, torch.Tensor) else len(v)


def take(v: Any, indices: Sequence[int]) -> Any:
    if isinstance(v, torch.Tensor):
        return v.index_select(0, torch.as_tensor(list(indices), dtype=torch.long, device=v.device))
    if isinstance(v, PackedTensor):
        return v.slice(list(indices))
    return [v[i] for i in indices]


def round_up(n: int, multiple: int) -> int:
    return ((n + multiple - 1) // multiple) * multiple


def packed_plan(
    lens: list[int], size: int, bs: int, shards: int, args: SequencePackingArgs
) -> tuple[list[list[int]], list[list[Ranges]], list[list[list[int]]]]:
    """Per chunk of ``bs`` rows: pack its sequences into bins (a multiple of ``shards`` of
    them) and deal them round-robin in the packer's order, so every shard runs as many
    micro-batches; with ``microbatch_order="largest_first"`` each shard runs its bins largest
    first (the allocator reuses the first one's memory). Returns each shard's rows, its
    micro-batch ranges per chunk and their token counts."""
    order = args.get("microbatch_order")
    if order not in MICROBATCH_ORDERS:
        raise ValueError(f"sequence packing microbatch_order must be 'packer' or 'largest_first', got {order!r}")
    multiple = int(args.get("sequence_length_pad_multiple", 1) or 1)
    budget = int(args["max_tokens_per_microbatch"])
    algorithm = args.get("algorithm", "modified_first_fit_decreasing")
    shard_rows: list[list[int]] = [[] for _ in range(shards)]
    ranges: list[list[Ranges]] = [[] for _ in range(shards)]
    tokens: list[list[list[int]]] = [[] for _ in range(shards)]
    for c in range(size // bs):
        rows = list(range(c * bs, (c + 1) * bs))
        sizes = [round_up(lens[r], multiple) for r in rows]
        bins = pack(sizes, budget, algorithm, min_bins=shards, bin_count_multiple=shards)
        for s in range(shards):
            dealt = [(sum(sizes[i] for i in b), b) for b in bins[s::shards]]
            if order == "largest_first":
                dealt.sort(key=lambda wb: -wb[0])  # stable: ties keep the packer's order
            ranges[s].append([])
            tokens[s].append([])
            for weight, b in dealt:
                start = len(shard_rows[s])
                shard_rows[s].extend(rows[i] for i in b)
                ranges[s][-1].append([start, len(shard_rows[s])])
                tokens[s][-1].append(weight)
    return shard_rows, ranges, tokens


def length_sorted_order(lens: list[int], size: int, bs: int, shards: int) -> list[int]:
    """Within each chunk: sort by length (longest first) and deal rows to shards so every
    shard gets a similar token count (greedy, to the lightest shard with room)."""
    per = bs // shards
    order: list[int] = []
    for c in range(size // bs):
        rows = sorted(range(c * bs, (c + 1) * bs), key=lambda i: (-lens[i], i))
        bins: list[list[int]] = [[] for _ in range(shards)]
        load = [0] * shards
        for i in rows:
            target = min((s for s in range(shards) if len(bins[s]) < per), key=lambda s: (load[s], s))
            bins[target].append(i)
            load[target] += lens[i]
        for b in bins:
            order.extend(sorted(b, key=lambda i: (-lens[i], i)))
    return order


def micro_batches(
    lens: list[int], args: DynamicBatchingArgs, rows_per_chunk: int
) -> tuple[list[Ranges], list[list[int]]]:
    """Micro-batches of each chunk (``rows_per_chunk`` rows, sorted longest first): as many
    rows as fit ``max_tokens_per_microbatch`` at the padded width of the longest. Returns the
    ranges and padded widths per chunk."""
    budget, rnd = args["max_tokens_per_microbatch"], args["sequence_length_round"]
    too_long = [n for n in lens if round_up(n, rnd) > budget]
    if too_long:
        raise ValueError(
            f"dynamic batching: sequence of length {max(too_long)} (rounded {round_up(max(too_long), rnd)}) "
            f"exceeds max_tokens_per_microbatch={budget}"
        )
    all_indices: list[Ranges] = []
    all_widths: list[list[int]] = []
    for chunk_start in range(0, len(lens), max(rows_per_chunk, 1)):
        chunk_end = min(chunk_start + rows_per_chunk, len(lens))
        indices: Ranges = []
        widths: list[int] = []
        start, longest = chunk_start, 0
        for i in range(chunk_start, chunk_end):
            width = round_up(max(longest, lens[i]), rnd)
            if i > start and (i - start + 1) * width > budget:
                indices.append([start, i])
                widths.append(round_up(longest, rnd))
                start, longest = i, 0
            longest = max(longest, lens[i])
        if chunk_end > chunk_start:
            indices.append([start, chunk_end])
            widths.append(round_up(longest, rnd))
        all_indices.append(indices)
        all_widths.append(widths)
    return all_indices, all_widths
