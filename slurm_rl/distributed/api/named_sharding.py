"""NamedSharding: workers arranged on named axes (e.g. data_parallel x tensor_parallel), NeMo
RL's shape. ``layout`` is a nested list of worker indices, ``names`` names its axes from the
outermost in; ``NamedSharding([[0, 1], [2, 3]], ["data_parallel", "tensor_parallel"])`` puts
workers 0 and 1 in data-parallel shard 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np


class NamedSharding:
    def __init__(self, layout: Sequence[Any] | np.ndarray, names: list[str]) -> None:
        try:
            array = np.array(layout)
        except ValueError as exc:  # ragged nesting
            raise ValueError(f"NamedSharding: layout is not a regular nested list of worker ids ({exc})") from None
        if array.size and not np.issubdtype(array.dtype, np.integer):
            if not np.issubdtype(array.dtype, np.number) or not np.equal(np.mod(array, 1), 0).all():
                raise ValueError(f"NamedSharding: layout must hold integer worker ids, got {array.dtype}")
            array = array.astype(np.int64)
        if array.ndim != len(names):
            raise ValueError(f"NamedSharding: layout has {array.ndim} dimensions but {len(names)} names {list(names)}")
        if len(set(names)) != len(names):
            raise ValueError(f"NamedSharding: axis names must be unique, got {list(names)}")
        ids, counts = np.unique(array, return_counts=True)
        if (counts > 1).any():
            raise ValueError(f"NamedSharding: duplicate worker ids in layout: {ids[counts > 1].tolist()}")
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
            raise ValueError(f"unknown sharding axis {name!r}; this layout's axes are {self._names}")

    # ---- lookups -----------------------------------------------------------------------------
    def get_worker_coords(self, worker_id: int) -> dict[str, int]:
        if worker_id not in self._coords:
            raise ValueError(f"worker {worker_id} is not in the sharding layout (ids {sorted(self._coords)})")
        return dict(self._coords[worker_id])

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
                raise IndexError(f"index {i} out of range for axis {name!r} of size {self.shape[name]}")
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
        return f"NamedSharding(shape={tuple(self._layout.shape)}, names={self._names}, layout={self._layout.tolist()})"
