"""Sequence packing (NeMo RL 2026's SequencePackingArgs): micro-batches within the token budget,
every sequence exactly once, bins dealt evenly to the shards, packing efficiency as NeMo RL
measures it, the original order restored by reorder_data; and the multimodal helpers beside it."""

from __future__ import annotations

import pytest
import torch

from slurm_rl.data.multimodal_utils import PackedTensor
from slurm_rl.data.sequence_packing import pack
from slurm_rl.distributed.batched_data_dict import BatchedDataDict, DynamicBatchingArgs, SequencePackingArgs

pytestmark = pytest.mark.unit


def packed_batch(lengths: torch.Tensor, width: int) -> BatchedDataDict:
    ids = torch.stack(
        [
            torch.cat([torch.ones(int(n), dtype=torch.long), torch.zeros(width - int(n), dtype=torch.long)])
            for n in lengths
        ]
    )
    return BatchedDataDict({"input_ids": ids, "sequence_lengths": lengths, "problem_ids": torch.arange(len(lengths))})


@pytest.mark.parametrize(("multiple", "band"), [(1, (0.955, 1.0)), (32, (0.91, 0.97)), (256, (0.60, 0.80))])
def test_packing_fills_micro_batches_and_restores_the_order(multiple: int, band: tuple[float, float]) -> None:
    torch.manual_seed(123)
    lengths = torch.randint(50, 800, (512,))
    batch = packed_batch(lengths, 800)
    args = SequencePackingArgs(
        max_tokens_per_microbatch=1200,
        input_key="input_ids",
        input_lengths_key="sequence_lengths",
        algorithm="modified_first_fit_decreasing",
        sequence_length_pad_multiple=multiple,
    )
    shards, sorted_indices = batch.shard_by_batch_size(shards=4, batch_size=256, sequence_packing_args=args)
    seen: list[int] = []
    for chunk in range(2):
        counts, tokens = [], 0
        for shard in shards:
            part = shard.get_batch(chunk)  # a global batch of the shard, its micro-batches renumbered
            micro = list(part.make_microbatch_iterator_for_packable_sequences())
            counts.append(len(micro))
            for mb in micro:
                padded = ((mb["sequence_lengths"] + multiple - 1) // multiple * multiple).sum().item()
                assert padded <= 1200
                ids = mb["problem_ids"].tolist()
                assert all(chunk * 256 <= i < (chunk + 1) * 256 for i in ids)  # never across global batches
                seen += ids
        assert max(counts) - min(counts) <= 1  # ranks get the same number of micro-batches, or one more
        tokens = int(lengths[chunk * 256 : (chunk + 1) * 256].sum())
        efficiency = tokens / (sum(counts) * 1200)
        assert band[0] <= efficiency <= band[1], efficiency
    assert sorted(seen) == list(range(512))
    back = BatchedDataDict.from_batches(shards)
    assert not torch.equal(back["problem_ids"], batch["problem_ids"])
    back.reorder_data(sorted_indices)
    assert torch.equal(back["problem_ids"], batch["problem_ids"]) and torch.equal(back["input_ids"], batch["input_ids"])


def test_packing_edge_cases_say_what_is_wrong() -> None:
    batch = packed_batch(torch.tensor([900, 850, 1000, 950]), 1024)
    args = SequencePackingArgs(
        max_tokens_per_microbatch=1024, input_key="input_ids", input_lengths_key="sequence_lengths"
    )
    shards, _ = batch.shard_by_batch_size(shards=2, sequence_packing_args=args)
    assert [r for s in shards for r in s.micro_batch_indices[0]] == [[0, 1], [1, 2], [0, 1], [1, 2]]  # one each
    dyn = DynamicBatchingArgs(
        max_tokens_per_microbatch=1024,
        sequence_length_round=4,
        input_key="input_ids",
        input_lengths_key="sequence_lengths",
    )
    with pytest.raises(AssertionError, match="cannot be passed together"):
        batch.shard_by_batch_size(shards=2, sequence_packing_args=args, dynamic_batching_args=dyn)
    with pytest.raises(ValueError, match="exceeds max_tokens_per_microbatch=512"):
        batch.shard_by_batch_size(shards=2, sequence_packing_args={**args, "max_tokens_per_microbatch": 512})
    with pytest.raises(ValueError, match="use one of modified_first_fit_decreasing"):
        batch.shard_by_batch_size(shards=2, sequence_packing_args={**args, "algorithm": "magic"})
    assert len(pack([10, 10, 10], 100, min_bins=2)) == 2  # every rank gets a micro-batch when it can


def test_reorder_data_moves_row_i_to_its_index() -> None:
    d = BatchedDataDict({"x": torch.tensor([10, 11, 12]), "s": ["a", "b", "c"]})
    d.reorder_data([2, 0, 1])  # row 0 goes to position 2, row 1 to 0, row 2 to 1
    assert d["x"].tolist() == [11, 12, 10] and d["s"] == ["b", "c", "a"]


def test_empty_trailing_shards_keep_every_key_and_multimodal_columns() -> None:
    images = PackedTensor([torch.randn(2, 3, 4, 4), torch.randn(1, 3, 4, 4)], dim_to_pack=0)
    batch = BatchedDataDict(
        {
            "input_ids": torch.tensor([[1, 2], [3, 4]]),
            "pixel_values": images,
            "token_type_ids": torch.ones(2, 2),
            "labels": [0, 1],
        }
    )
    shards = batch.shard_by_batch_size(shards=4, allow_uneven_shards=True)
    for empty in shards[2:]:
        assert empty["input_ids"].shape[0] == 0 and empty["labels"] == []
        assert isinstance(empty["pixel_values"], PackedTensor) and empty["pixel_values"].as_tensor() is None
    mm = batch.get_multimodal_dict(as_tensors=True)
    assert set(mm) == {"pixel_values", "token_type_ids"} and mm["pixel_values"].shape[0] == 3
    assert isinstance(batch.get_multimodal_dict()["pixel_values"], PackedTensor)
