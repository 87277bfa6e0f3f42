"""BatchedDataDict: the contract's examples, uneven shards, dynamic batching, round trips."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from slurm_rl.distributed.batched_data_dict import BatchedDataDict, DynamicBatchingArgs, SlicedDataDict


def _bdd(n: int) -> BatchedDataDict:
    return BatchedDataDict({"x": torch.arange(n), "names": [f"r{i}" for i in range(n)]})


def test_size() -> None:
    assert BatchedDataDict().size == 0
    assert _bdd(5).size == 5


def test_contract_shard_example() -> None:
    shards = _bdd(8).shard_by_batch_size(2, batch_size=4)
    assert [s["x"].tolist() for s in shards] == [[0, 1, 4, 5], [2, 3, 6, 7]]
    assert [s["names"] for s in shards] == [["r0", "r1", "r4", "r5"], ["r2", "r3", "r6", "r7"]]
    assert all(isinstance(s, SlicedDataDict) for s in shards)


def test_shard_whole_batch_when_no_batch_size() -> None:
    assert [s["x"].tolist() for s in _bdd(6).shard_by_batch_size(3)] == [[0, 1], [2, 3], [4, 5]]


def test_uneven_shards_error_unless_allowed() -> None:
    with pytest.raises(ValueError, match="allow_uneven_shards"):
        _bdd(6).shard_by_batch_size(4)
    shards = _bdd(6).shard_by_batch_size(4, allow_uneven_shards=True)
    assert [s["x"].tolist() for s in shards] == [[0, 1], [2, 3], [4, 5], []]
    with pytest.raises(ValueError, match="multiple of batch_size"):
        _bdd(6).shard_by_batch_size(2, batch_size=4)


def test_from_batches_pads_2d_and_joins_lists() -> None:
    a = {"ids": torch.ones(2, 3, dtype=torch.long), "len": torch.tensor([3, 3]), "t": ["a", "b"]}
    b = {"ids": torch.full((1, 5), 2), "len": torch.tensor([5]), "t": ["c"]}
    out = BatchedDataDict.from_batches([a, b], pad_value_dict={"ids": -1})
    assert out["ids"].shape == (3, 5)
    assert out["ids"][0].tolist() == [1, 1, 1, -1, -1] and out["ids"][2].tolist() == [2] * 5
    assert out["len"].tolist() == [3, 3, 5] and out["t"] == ["a", "b", "c"]
    default = BatchedDataDict.from_batches([a, b])
    assert default["ids"][0].tolist() == [1, 1, 1, 0, 0]


def test_repeat_interleave_deep_copies_lists() -> None:
    d = BatchedDataDict({"x": torch.tensor([1, 2]), "m": [{"k": 1}, {"k": 2}]})
    r = d.repeat_interleave(3)
    assert r["x"].tolist() == [1, 1, 1, 2, 2, 2]
    assert [m["k"] for m in r["m"]] == [1, 1, 1, 2, 2, 2]
    r["m"][0]["k"] = 99
    assert r["m"][1]["k"] == 1 and d["m"][0]["k"] == 1


def test_select_reorder_slice_chunk_get_batch() -> None:
    d = _bdd(6)
    assert d.select_indices([5, 0])["names"] == ["r5", "r0"]
    d.reorder_data([5, 4, 3, 2, 1, 0])
    assert d["x"].tolist() == [5, 4, 3, 2, 1, 0]
    with pytest.raises(ValueError, match="permutation"):
        d.reorder_data([0, 0, 1, 2, 3, 4])
    d = _bdd(7)
    assert d.slice(2, 4)["x"].tolist() == [2, 3]
    assert [d.chunk(r, 3)["x"].tolist() for r in range(3)] == [[0, 1, 2], [3, 4], [5, 6]]
    assert d.get_batch(1, 3)["x"].tolist() == [3, 4, 5]


def test_truncate_and_microbatches_and_to() -> None:
    d = BatchedDataDict({"ids": torch.zeros(5, 8), "n": [1, 2, 3, 4, 5]})
    d.truncate_tensors(1, 4)
    assert d["ids"].shape == (5, 4)
    assert [mb.size for mb in d.make_microbatch_iterator(2)] == [2, 2, 1]
    assert d.to("cpu") is d and d.to_device("cpu")["ids"].device.type == "cpu"
    assert d.get_dict().keys() == {"ids", "n"}


DYN = DynamicBatchingArgs(
    max_tokens_per_microbatch=64, sequence_length_round=8, input_key="ids", input_lengths_key="lens"
)


def test_dynamic_batching_respects_token_budget() -> None:
    lens = [3, 30, 17, 9, 25, 4, 12, 40, 8, 1, 22, 16]
    d = BatchedDataDict({"ids": torch.zeros(12, 40), "lens": torch.tensor(lens)})
    shards, sorted_indices = d.shard_by_batch_size(2, batch_size=12, dynamic_batching_args=DYN)
    assert sorted(sorted_indices) == list(range(12))
    for s in shards:
        assert s.micro_batch_indices is not None and s.micro_batch_lengths is not None
        [ranges] = s.micro_batch_indices  # one chunk (global batch)
        covered = [i for a, b in ranges for i in range(a, b)]
        assert covered == list(range(s.size))
        for mb in s.make_microbatch_iterator_with_dynamic_shapes():
            width = mb["ids"].shape[1]
            assert width % 8 == 0 and mb.size * width <= 64
            assert max(mb["lens"].tolist()) <= width
    # balanced: the shards' token counts are within one longest sequence of each other
    loads = [sum(s["lens"].tolist()) for s in shards]
    assert abs(loads[0] - loads[1]) <= max(lens)
    with pytest.raises(ValueError, match="exceeds"):
        BatchedDataDict({"ids": torch.zeros(2, 80), "lens": torch.tensor([80, 1])}).shard_by_batch_size(
            1, dynamic_batching_args=DYN
        )


@settings(max_examples=60, deadline=None)
@given(shards=st.integers(1, 5), chunks=st.integers(1, 4), per=st.integers(1, 4))
def test_shard_then_concat_round_trip(shards: int, chunks: int, per: int) -> None:
    bs = shards * per
    d = _bdd(bs * chunks)
    parts = d.shard_by_batch_size(shards, batch_size=bs)
    assert all(p.size == per * chunks for p in parts)
    # re-interleave: chunk c of the original is the c-th piece of every shard, in shard order
    rebuilt = BatchedDataDict.from_batches([p.slice(c * per, (c + 1) * per) for c in range(chunks) for p in parts])
    assert rebuilt["x"].tolist() == d["x"].tolist() and rebuilt["names"] == d["names"]


@settings(max_examples=60, deadline=None)
@given(n=st.integers(0, 40), chunks=st.integers(1, 7))
def test_chunk_round_trip(n: int, chunks: int) -> None:
    d = _bdd(n)
    parts = [d.chunk(r, chunks) for r in range(chunks)]
    rebuilt = BatchedDataDict.from_batches(parts)
    assert rebuilt.get("names", []) == d["names"]
    assert sum(p.size for p in parts) == n
