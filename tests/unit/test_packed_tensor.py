"""PackedTensor (NeMo RL 2026's multimodal column) alone and as a BatchedDataDict column."""

from __future__ import annotations

import pytest
import torch

from slurm_rl.data.multimodal_utils import PackedTensor
from slurm_rl.distributed.batched_data_dict import BatchedDataDict


def images(*rows: int) -> PackedTensor:
    """Row i: ``rows[i]`` patches of 2 values, all equal to i (0 rows: None)."""
    return PackedTensor([torch.full((n, 2), float(i)) if n else None for i, n in enumerate(rows)], dim_to_pack=0)


def test_packing_concat_and_flattening() -> None:
    p1 = PackedTensor([torch.tensor([1, 2, 3]), torch.tensor([4, 5, 6])], dim_to_pack=0)
    p2 = PackedTensor([torch.tensor([7, 8, 9])], dim_to_pack=0)
    both = PackedTensor.concat([p1, p2])
    assert len(both) == 3 and both.as_tensor().tolist() == list(range(1, 10))
    flat = PackedTensor.flattened_concat([p1, p2])
    assert len(flat) == 2 and flat.tensors[0].tolist() == [1, 2, 3, 4, 5, 6]
    assert images(2, 0, 1).as_tensor().shape == (3, 2)  # a None row adds nothing
    assert PackedTensor.empty_like(p1).as_tensor() is None and len(PackedTensor.empty_rows_like(p1, 4)) == 4
    with pytest.raises(AssertionError, match="same dim_to_pack"):
        PackedTensor.concat([p1, PackedTensor([torch.ones(1)], dim_to_pack=1)])
    with pytest.raises(ValueError, match="cannot be None"):
        PackedTensor(None)  # type: ignore[arg-type]


def test_padding_to_the_largest_shape_and_dtypes() -> None:
    p = PackedTensor([torch.ones(2, 3), torch.ones(1, 5)], dim_to_pack=0, pad_to_max_shape=True)
    packed = p.as_tensor()
    assert packed.shape == (3, 5) and packed[0, 3:].tolist() == [0.0, 0.0] and packed[2].tolist() == [1.0] * 5
    mixed = PackedTensor([torch.ones(2), torch.tensor([3, 4])]).to_dtype(torch.float16)
    assert mixed.tensors[0].dtype == torch.float16 and mixed.tensors[1].dtype == torch.int64  # grid sizes kept


def test_a_batch_with_a_packed_column_slices_shards_and_concatenates_row_by_row() -> None:
    batch = BatchedDataDict({"ids": torch.arange(4), "pixels": images(1, 2, 0, 3)})
    shards = batch.shard_by_batch_size(2)
    assert [s["ids"].tolist() for s in shards] == [[0, 1], [2, 3]]
    assert shards[1]["pixels"].as_tensor().tolist() == [[3.0, 3.0]] * 3  # row 2 has none, row 3 three
    picked = batch.select_indices([3, 0])
    assert picked["pixels"] == PackedTensor([torch.full((3, 2), 3.0), torch.zeros(1, 2)])
    again = BatchedDataDict.from_batches([shards[0], shards[1]])
    assert again["pixels"] == batch["pixels"] and again["ids"].tolist() == [0, 1, 2, 3]
    with pytest.raises(NotImplementedError, match="column 'pixels'"):  # NeMo RL 2026: media repeat inside rows
        batch.slice(0, 2).repeat_interleave(2)
    with pytest.raises(AssertionError, match="found sizes"):
        BatchedDataDict({"ids": torch.arange(3), "pixels": images(1, 2)}).shard_by_batch_size(1)
