"""NamedSharding: workers arranged on named axes (e.g. data_parallel x tensor_parallel), NeMo
RL's shape. ``layout`` is a nested list of worker indices, ``names`` names its axes from the
outermost in; ``NamedSharding([[0, 1], [2, 3]], ["data_parallel", "tensor_parallel"])`` puts
workers 0 and 1 in data-parallel shard 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

# Axes along which every worker holds the same data: the leader of a group is the worker at 0 on
# all of them (NeMo RL 2026's default for ``is_axis_zero``).
REPLICATED_AXES: tuple[str, ...] = ("tensor_parallel", "context_parallel", "pipeline_parallel")


class NamedSharding:
    def __init__(self, layout: Sequence[Any] | np.ndarray, names: list[str]) -> None:
        try:
            array = np.array(layout)
        except ValueError as exc:  # ragged nesting
            raise ValueError(
                f"Could not create NumPy array from layout: {exc} (a regular nested list of worker ids)"
            ) from None
        if array.size and not np.issubdtype(array.dtype, np.integer):
            if not np.issubdtype(array.dtype, np.number) or not np.equal(np.mod(array, 1), 0).all():
                raise ValueError(f"Layout must contain only integer rank IDs (got {array.dtype}).")
            array = array.astype(np.int64)
        if array.ndim != len(names):
            raise ValueError(
                f"Number of dimensions in layout ({array.ndim}) must match the number of names ({len(names)}): "
                f"{list(names)}."
            )
        if len(set(names)) != len(names):
            raise ValueError(f"NamedSharding: axis names must be unique, got {list(names)}")
        ids, counts = np.unique(array, return_counts=True)
        if (counts > 1).any():
            raise ValueError(f"Duplicate ranks found in layout: {ids[counts > 1].tolist()}")
        self._layout = array
        self._names = list(names)
        self._coords = {int(w): dict(zip(self._names, (int(i) for i in idx))) for idx, w in np.ndenumerate(array)}

    # ---- shape -------------------------------------------------------------------------------
    @property
    def names(self) -> list[str]:
        return list(self._names)

    @property
    def shape(self) -> dict[str, int]:
        return dict(zip(self._names, self._layout.shape))

    @property
    def ndim(self) -> int:
        return int(self._layout.ndim)

    @property
    def size(self) -> int:
        return int(self._layout.size)

    @property
    def layout(self) -> np.ndarray:
        return self._layout.copy()

    def get_axis_index(self, name: str) -> int:
        self._check_axis(name)
        return self._names.index(name)

    def get_axis_size(self, name: str) -> int:
        self._check_axis(name)
        return self.shape[name]

    def _check_axis(self, name: str) -> None:
        if name not in self._names:
            raise ValueError(f"Invalid axis name: '{name}'. Valid names are: {self._names}")

    # ---- lookups -----------------------------------------------------------------------------
    def get_worker_coords(self, worker_id: int) -> dict[str, int]:
        if worker_id not in self._coords:
            raise ValueError(f"Worker ID {worker_id} not found in sharding layout (ids {sorted(self._coords)}).")
        return dict(self._coords[worker_id])

    @staticmethod
    def is_axis_zero(coords: dict[str, int], axes: Sequence[str] = REPLICATED_AXES) -> bool:
        """True when ``coords`` is 0 on every one of ``axes`` (an axis ``coords`` lacks counts as
        0): the leader of a replicated group, e.g. ``is_axis_zero(get_worker_coords(w))``."""
        return all(coords.get(axis, 0) == 0 for axis in axes)

    def contains_worker_id(self, worker_id: int) -> bool:
        return worker_id in self._coords

    def replace_worker_id(self, old_id: int, new_id: int) -> bool:
        """Put ``new_id`` where ``old_id`` is (a replacement takes a dead worker's place); False
        when ``old_id`` is not in the layout. ``new_id`` must not be elsewhere in it."""
        if old_id not in self._coords:
            return False
        if new_id != old_id and new_id in self._coords:
            raise ValueError(f"Duplicate ranks found in layout: worker {new_id} is already at {self._coords[new_id]}")
        coords = self._coords.pop(old_id)
        self._layout[tuple(coords[n] for n in self._names)] = new_id
        self._coords[new_id] = coords
        return True

    def get_ranks_by_coord(self, **coords: int) -> list[int]:
        """Worker ids at these coordinates (unnamed axes: every index), sorted."""
        index: list[Any] = [slice(None)] * self.ndim
        for name, i in coords.items():
            self._check_axis(name)
            if not 0 <= i < self.shape[name]:
                return []
            index[self._names.index(name)] = i
        return sorted(int(w) for w in np.unique(self._layout[tuple(index)]))

    def get_ranks(self, **coords: int) -> NamedSharding | int:
        """The sub-layout at these coordinates (an int when every axis is given)."""
        index: list[Any] = [slice(None)] * self.ndim
        for name, i in coords.items():
            self._check_axis(name)
            if not 0 <= i < self.shape[name]:
                raise IndexError(f"Index {i} is out of bounds for axis '{name}' with size {self.shape[name]}")
            index[self._names.index(name)] = i
        sub = self._layout[tuple(index)]
        rest = [n for n in self._names if n not in coords]
        return int(sub) if not rest else NamedSharding(sub, rest)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, NamedSharding):
            return NotImplemented
        return self._names == other._names and np.array_equal(self._layout, other._layout)

    def __hash__(self) -> int:
        return hash((tuple(self._names), self._layout.tobytes()))

    def __repr__(self) -> str:
        # numpy's own print of the layout (NeMo RL's): the grid of ranks reads as a grid
        return f"NamedSharding(shape={tuple(self._layout.shape)}, names={self._names}, layout=\n{self._layout})"
