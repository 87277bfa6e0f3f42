"""NamedSharding as NeMo RL 2026 has it: coordinates, leaders of replicated axes, a replacement
worker taking a dead one's place, and NeMo RL's error texts (its tests match on them)."""

from __future__ import annotations

import pytest

from slurm_rl.distributed.named_sharding import REPLICATED_AXES, NamedSharding

LAYOUT = [[[0, 1], [2, 3]], [[4, 5], [6, 7]]]
NAMES = ["data_parallel", "pipeline_parallel", "tensor_parallel"]


def test_coordinates_both_ways() -> None:
    s = NamedSharding(LAYOUT, NAMES)
    assert s.get_worker_coords(6) == {"data_parallel": 1, "pipeline_parallel": 1, "tensor_parallel": 0}
    assert s.get_ranks_by_coord(data_parallel=1) == [4, 5, 6, 7]
    assert s.get_ranks_by_coord(tensor_parallel=1, pipeline_parallel=0) == [1, 5]
    assert s.get_ranks_by_coord(data_parallel=5) == []  # out of range: nothing, not an error


def test_leaders_are_zero_on_the_replicated_axes() -> None:
    s = NamedSharding(LAYOUT, NAMES)
    leaders = [w for w in range(8) if NamedSharding.is_axis_zero(s.get_worker_coords(w))]
    assert leaders == [0, 4] and "tensor_parallel" in REPLICATED_AXES
    assert NamedSharding.is_axis_zero({"tensor_parallel": 0}, ["tensor_parallel", "context_parallel"])
    assert not NamedSharding.is_axis_zero(s.get_worker_coords(1), ["tensor_parallel"])


def test_a_replacement_takes_the_dead_workers_place() -> None:
    s = NamedSharding(LAYOUT, NAMES)
    where = s.get_worker_coords(5)
    assert s.replace_worker_id(5, 12) and s.get_worker_coords(12) == where
    assert not s.contains_worker_id(5) and s.contains_worker_id(12)
    assert s.get_ranks_by_coord(data_parallel=1) == [4, 6, 7, 12]
    assert s.replace_worker_id(99, 100) is False
    with pytest.raises(ValueError, match="Duplicate ranks"):
        s.replace_worker_id(4, 6)


@pytest.mark.parametrize(
    ("layout", "names", "error", "text"),
    [
        ([[0, 1], [2]], ["a", "b"], ValueError, "Could not create NumPy array from layout"),
        ([[0.5, 1.0]], ["a", "b"], ValueError, "Layout must contain only integer rank IDs"),
        ([[0, 1]], ["a"], ValueError, r"Number of dimensions in layout \(2\) must match the number of names \(1\)"),
        ([[0, 0]], ["a", "b"], ValueError, r"Duplicate ranks found in layout: \[0\]"),
    ],
)
def test_bad_layouts_in_nemo_rls_words(layout, names, error, text) -> None:
    with pytest.raises(error, match=text):
        NamedSharding(layout, names)


def test_bad_lookups_in_nemo_rls_words() -> None:
    s = NamedSharding(LAYOUT, NAMES)
    with pytest.raises(ValueError, match=r"Invalid axis name: 'dp'\. Valid names are"):
        s.get_ranks_by_coord(dp=0)
    with pytest.raises(ValueError, match="Worker ID 42 not found in sharding layout"):
        s.get_worker_coords(42)
    with pytest.raises(IndexError, match="Index 2 is out of bounds for axis 'data_parallel' with size 2"):
        s.get_ranks(data_parallel=2)
    assert NamedSharding([[1.0, 2.0]], ["a", "b"]).get_worker_coords(2) == {"a": 0, "b": 1}


def test_repr_prints_the_layout_as_numpy_does() -> None:
    text = repr(NamedSharding([[[0, 1, 2, 3], [4, 5, 6, 7]]], ["dp", "pp", "tp"]))
    assert text.startswith("NamedSharding(shape=(1, 2, 4), names=['dp', 'pp', 'tp'], layout=")
    assert "[[[0 1 2 3]\n  [4 5 6 7]]]" in text
