"""Sequence packing: sequences of one global batch put into micro-batches ("bins") of at most
``max_tokens_per_microbatch`` tokens each, so that a worker runs few, full micro-batches instead
of one padded row per sequence. A sequence's size is its length rounded up to
``sequence_length_pad_multiple``. Pure functions over sizes; BatchedDataDict.shard_by_batch_size
uses them (NeMo RL's ``SequencePackingArgs``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

Bins = list[list[int]]  # each bin: indices into the sizes given


def _first_fit(order: Sequence[int], sizes: Sequence[int], capacity: int, bins: Bins, loads: list[int]) -> None:
    for i in order:
        for b, load in enumerate(loads):
            if load + sizes[i] <= capacity:
                bins[b].append(i)
                loads[b] += sizes[i]
                break
        else:
            bins.append([i])
            loads.append(sizes[i])


def first_fit_decreasing(sizes: Sequence[int], capacity: int) -> Bins:
    """Largest first, each into the first bin it fits (at most 11/9 OPT + 1 bins)."""
    bins: Bins = []
    loads: list[int] = []
    _first_fit(sorted(range(len(sizes)), key=lambda i: (-sizes[i], i)), sizes, capacity, bins, loads)
    return bins


def modified_first_fit_decreasing(sizes: Sequence[int], capacity: int) -> Bins:
    """Johnson and Garey's MFFD (at most 71/60 OPT + 1 bins): items over half the capacity open
    a bin each; medium items (over a third) go, largest that fits, into those bins front to back;
    small items (over a sixth) go in pairs into the emptiest of them, back to front; the rest
    first-fit decreasing over all bins."""
    order = sorted(range(len(sizes)), key=lambda i: (-sizes[i], i))
    large = [i for i in order if sizes[i] * 2 > capacity]
    medium = [i for i in order if capacity < sizes[i] * 3 and sizes[i] * 2 <= capacity]
    small = [i for i in order if capacity < sizes[i] * 6 and sizes[i] * 3 <= capacity]
    bins: Bins = [[i] for i in large]
    loads = [sizes[i] for i in large]
    for b in range(len(bins)):  # forward: the largest medium item that fits
        fit = next((i for i in medium if loads[b] + sizes[i] <= capacity), None)
        if fit is not None:
            medium.remove(fit)
            bins[b].append(fit)
            loads[b] += sizes[fit]
    for b in reversed(range(len(bins))):  # backward: the smallest small item, then the largest that fits beside it
        if len(small) < 2 or loads[b] + sizes[small[-1]] + sizes[small[-2]] > capacity:
            continue
        smallest = small.pop()
        bins[b].append(smallest)
        loads[b] += sizes[smallest]
        fit = next((i for i in small if loads[b] + sizes[i] <= capacity), None)
        if fit is not None:
            small.remove(fit)
            bins[b].append(fit)
            loads[b] += sizes[fit]
    rest = sorted(medium + small + [i for i in order if sizes[i] * 6 <= capacity], key=lambda i: (-sizes[i], i))
    _first_fit(rest, sizes, capacity, bins, loads)
    return bins


def concatenative(sizes: Sequence[int], capacity: int) -> Bins:
    """In the given order, a new bin whenever the next sequence does not fit the current one."""
    bins: Bins = []
    load = capacity + 1
    for i, size in enumerate(sizes):
        if load + size > capacity:
            bins.append([])
            load = 0
        bins[-1].append(i)
        load += size
    return bins


ALGORITHMS: dict[str, Callable[[Sequence[int], int], Bins]] = {
    "modified_first_fit_decreasing": modified_first_fit_decreasing,
    "first_fit_decreasing": first_fit_decreasing,
    "concatenative": concatenative,
}


def pack(
    sizes: Sequence[int],
    capacity: int,
    algorithm: str = "modified_first_fit_decreasing",
    min_bins: int = 1,
    bin_count_multiple: int = 1,
) -> Bins:
    """Bins of indices into ``sizes``, none over ``capacity``; at least ``min_bins`` of them,
    and a multiple of ``bin_count_multiple``, where there are that many sequences (the fullest
    bins give up their largest sequence), so that every data-parallel rank gets as many
    micro-batches as the others."""
    if algorithm not in ALGORITHMS:
        raise ValueError(f"sequence packing algorithm {algorithm!r}: use one of {', '.join(ALGORITHMS)}")
    too_long = [s for s in sizes if s > capacity]
    if too_long:
        raise ValueError(
            f"sequence packing: a sequence of {max(too_long)} tokens (after padding) exceeds "
            f"max_tokens_per_microbatch={capacity}"
        )
    bins = [b for b in ALGORITHMS[algorithm](sizes, capacity) if b]
    want = max(min_bins, -(-len(bins) // bin_count_multiple) * bin_count_multiple)
    while len(bins) < min(want, len(sizes)):
        donor = max((b for b in bins if len(b) > 1), key=lambda b: (sum(sizes[i] for i in b), len(b)))
        largest = max(donor, key=lambda i: sizes[i])
        donor.remove(largest)
        bins.append([largest])
    return bins
