"""NeMo RL 2026's batch semantics for multimodal GRPO: a prompt's media held once across its G
repeats (de-duplicated PackedTensors that stay de-duplicated through sharding, selection and
concatenation), batches of different media concatenated, the pixel cast that keeps the sharing,
and sequence packing's bin order and per-batch element counts."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from slurm_rl.data.multimodal_utils import PackedTensor
from slurm_rl.distributed.batched_data_dict import BatchedDataDict, SequencePackingArgs


def shared(value: list[list[float]], times: int) -> PackedTensor:
    return PackedTensor.concat([PackedTensor(torch.tensor(value), dim_to_pack=0).enable_deduplication()] * times)


def test_repeats_share_media_only_when_asked_and_rows_stay_their_own() -> None:
    image = PackedTensor(torch.ones(1, 3), dim_to_pack=0)
    audio = np.zeros(8, dtype=np.float32)
    batch = BatchedDataDict(
        {
            "message_log": [[{"role": "user", "token_ids": torch.tensor([1, 2]), "pixel_values": image}]],
            "vllm_audios": [[(audio, 16_000)]],
        }
    )
    plain = batch.repeat_interleave(3)
    pixels = [m[0]["pixel_values"] for m in plain["message_log"]]
    assert len({id(p.tensors[0]) for p in pixels}) == 3 and not pixels[0].deduplication_enabled
    assert plain["vllm_audios"][0][0][0] is not plain["vllm_audios"][1][0][0]

    lean = batch.repeat_interleave(3, share_immutable_media=True)
    pixels = [m[0]["pixel_values"] for m in lean["message_log"]]
    assert len({id(p) for p in pixels}) == 3 and len({id(p.tensors[0]) for p in pixels}) == 1
    assert (
        all(p.deduplication_enabled for p in pixels) and pixels[0]._segment_provenance == pixels[2]._segment_provenance
    )
    tokens = [m[0]["token_ids"] for m in lean["message_log"]]
    assert tokens[0] is not tokens[1]  # text is the row's own: it is edited per sample
    lean["message_log"][0][0]["role"] = "edited"
    assert (
        lean["message_log"][1][0]["role"] == "user" and not image.deduplication_enabled
    )  # the caller's value untouched
    assert (
        lean["vllm_audios"][0][0][0] is lean["vllm_audios"][2][0][0]
        and lean["vllm_audios"][0] is not lean["vllm_audios"][1]
    )
    with pytest.raises(NotImplementedError, match="column 'pixel_values'"):
        BatchedDataDict({"pixel_values": image}).repeat_interleave(2)


def test_shared_media_travel_once_per_shard_and_materialize_per_row() -> None:
    media = PackedTensor.concat([shared([[1.0, 1.0]], 2), shared([[2.0, 2.0]], 2)])
    assert len(media) == 4 and len(media.tensors) == 2 and media.logical_segment_counts_by_row() == [1, 1, 1, 1]
    batch = BatchedDataDict({"ids": torch.arange(4), "pixel_values": media})
    shards = batch.shard_by_batch_size(shards=2)
    assert [len(s["pixel_values"].tensors) for s in shards] == [1, 1]  # each shard carries its image once
    assert shards[1]["pixel_values"].as_tensor().tolist() == [[2.0, 2.0], [2.0, 2.0]]
    picked = batch.select_indices([3, 0])
    assert len(picked["pixel_values"].tensors) == 2 and picked["pixel_values"].as_tensor()[:, 0].tolist() == [2.0, 1.0]
    again = BatchedDataDict.from_batches(shards)
    assert len(again["pixel_values"].tensors) == 2 and torch.equal(again["pixel_values"].as_tensor(), media.as_tensor())
    cast = batch.get_multimodal_dict(pixel_dtype=torch.bfloat16)["pixel_values"]
    assert cast.tensors[0].dtype == torch.bfloat16 and media.tensors[0].dtype == torch.float32
    assert cast._segment_indices == media._segment_indices and cast._segment_provenance != media._segment_provenance


def test_batches_with_different_media_concatenate_with_empty_rows() -> None:
    images = BatchedDataDict({"ids": torch.tensor([1, 2]), "pixel_values": shared([[1.0]], 2)})
    sounds = BatchedDataDict({"ids": torch.tensor([3]), "audio_values": shared([[5.0]], 1)})
    with pytest.raises(KeyError, match="non-empty batches"):
        BatchedDataDict.from_batches([images, sounds])
    both = BatchedDataDict.from_batches([images, sounds], allow_missing_packed_tensors=True)
    assert both.size == 3 and len(both["pixel_values"]) == 3 and len(both["audio_values"]) == 3
    assert (
        both["pixel_values"].slice([2]).as_tensor() is None
        and both["audio_values"].slice([2]).as_tensor().item() == 5.0
    )
    lopsided = BatchedDataDict({"ids": torch.tensor([1, 2]), "pixel_values": shared([[1.0]], 1)})
    with pytest.raises(ValueError, match="inconsistent logical row counts"):
        BatchedDataDict.from_batches([lopsided], allow_missing_packed_tensors=True)
    empty = BatchedDataDict({"ids": torch.zeros(0, dtype=torch.long)})  # no routed_experts: it produced nothing
    routed = BatchedDataDict({"ids": torch.tensor([7]), "routed_experts": torch.ones(1, 2, 2)})
    assert BatchedDataDict.from_batches([empty, routed, BatchedDataDict()])["routed_experts"].shape == (1, 2, 2)


def test_pixels_and_their_sizes_must_pair_up_segment_by_segment() -> None:
    pixels = PackedTensor([torch.ones(1, 1), torch.ones(1, 1)], dim_to_pack=0).enable_deduplication()
    sizes = PackedTensor([torch.tensor([[4, 4]]), torch.tensor([[8, 8]])], dim_to_pack=0).enable_deduplication()
    good = BatchedDataDict({"pixel_values": pixels, "imgs_sizes": sizes}).get_multimodal_dict(as_tensors=True)
    assert good["imgs_sizes"].tolist() == [[4, 4], [8, 8]]
    both_in_one_row = PackedTensor.merge_segments([sizes.slice([0]), sizes.slice([1])])
    skewed = PackedTensor.concat([both_in_one_row, PackedTensor.empty_rows_like(both_in_one_row, 1)])
    assert skewed.logical_segment_counts_by_row() == [2, 0]
    with pytest.raises(ValueError, match="ordered per-row segment counts"):
        BatchedDataDict({"pixel_values": pixels, "imgs_sizes": skewed}).get_multimodal_dict(as_tensors=True)


def test_packed_bins_are_dealt_round_robin_and_run_largest_first_when_asked() -> None:
    lengths = torch.tensor([46, 24, 55, 88, 11, 14, 73, 17] * 2)
    batch = BatchedDataDict({"ids": torch.arange(16), "lengths": lengths})
    args = SequencePackingArgs(max_tokens_per_microbatch=100, input_key="ids", input_lengths_key="lengths")
    as_packed, _ = batch.shard_by_batch_size(shards=2, batch_size=8, sequence_packing_args=args)
    largest, order = batch.shard_by_batch_size(
        shards=2, batch_size=8, sequence_packing_args={**args, "microbatch_order": "largest_first"}
    )
    for p, q in zip(as_packed, largest):
        assert len(p.micro_batch_lengths[0]) == len(q.micro_batch_lengths[0])  # every rank as many bins
        assert [sorted(c, reverse=True) for c in p.micro_batch_lengths] == q.micro_batch_lengths
        assert q.elem_counts_per_gb is not None and sum(q.elem_counts_per_gb) == q.size
        assert torch.all(q["ids"][: q.elem_counts_per_gb[0]] < 8)  # chunks keep their rows
    back = BatchedDataDict.from_batches(largest)
    back.reorder_data(order)
    assert back["ids"].tolist() == list(range(16))
    with pytest.raises(ValueError, match="microbatch_order"):
        batch.shard_by_batch_size(shards=1, sequence_packing_args={**args, "microbatch_order": "random"})
