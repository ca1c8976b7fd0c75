"""The smoothed tables a model computes from its statistics, and the cache that holds them
between a change of the statistics and the next read."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import ClassVar, Generic, TypeAlias, TypeVar

import numpy as np
import numpy.typing as npt

from ..utils.ndarrays import FloatArray, IndexArray, IntArray

TableValue: TypeAlias = "FloatArray | IntArray | list[FloatArray] | np.float64"


@dataclass
class Tables:
    """The smoothed tables of a model, computed from its statistics; each model's subclass
    declares its own, in the order a snapshot stores them."""

    _may_be_infinite: ClassVar[frozenset[str]] = frozenset()  # log priors: -inf for a prior of 0

    def as_dict(self) -> dict[str, TableValue]:
        """The tables by name, in declaration order (the arrays themselves)."""
        return {table.name: getattr(self, table.name) for table in fields(self)}

    def not_finite(self) -> list[str]:
        """The names of the tables holding an infinite or NaN value where none belongs."""
        return [name for name, value in self.as_dict().items() if name not in self._may_be_infinite
                and not all(_all_finite(np.asarray(part)) for part in _parts(value))]


TablesT = TypeVar("TablesT", bound=Tables)
_CHECK_BLOCK = 1 << 20  # values checked at a time: no mask of a whole table (an eighth of its size)


def _all_finite(array: npt.NDArray[np.generic]) -> bool:
    flat = array.reshape(-1)
    return all(np.isfinite(flat[start:start + _CHECK_BLOCK]).all() for start in range(0, flat.size, _CHECK_BLOCK))


class TouchedFeatures:
    """The features whose statistics changed since the tables were last refreshed: a mask over
    the features, so a batch is noted in one scatter of its column indices (no sort)."""

    def __init__(self, n_features: int):
        self.n_features = n_features
        self._mask: npt.NDArray[np.bool_] | None = None  # shape (n_features,), made at the first mark
        self._marked = 0  # indices marked since the last take: an upper bound of the features touched

    def mark(self, features: IndexArray) -> int:
        """Note these feature indices (repeats allowed); returns how many features are touched."""
        if self._mask is None:
            self._mask = np.zeros(self.n_features, dtype=bool)
        self._mask[features] = True
        self._marked += len(features)
        if self._marked > self.n_features // 8:  # count only when the bound says it could matter
            self._marked = int(np.count_nonzero(self._mask))
        return self._marked

    def take(self) -> IndexArray:
        """The touched features, sorted, shape (n_touched,); none are touched after."""
        if self._mask is None:
            return np.zeros(0, dtype=np.intp)
        features = np.flatnonzero(self._mask)
        self._mask[features] = False
        self._marked = 0
        return features

    def clear(self) -> None:
        if self._marked and self._mask is not None:
            self._mask[:] = False
            self._marked = 0

    def __bool__(self) -> bool:
        return self._marked > 0


class TableCache(Generic[TablesT]):
    """The tables of the current statistics, or None while they are stale, and the features
    touched since they were computed. Reading the tables fills this one object, so predicting
    never rebinds the estimator's own attributes."""

    def __init__(self, n_features: int):
        self.tables: TablesT | None = None
        self.touched = TouchedFeatures(n_features)

    def invalidate(self) -> None:
        self.tables = None
        self.touched.clear()


def check_tables(stored: Mapping[str, TableValue], computed: Mapping[str, TableValue]) -> None:
    """Stored smoothed tables must be those the statistics give (to rounding). Tables of another
    version (other names) are left aside: they are derived, and computed again anyway."""
    if set(stored) != set(computed):
        return
    for name, value in computed.items():
        mine, theirs = _parts(value), _parts(stored[name])
        if len(mine) != len(theirs) or any(not _close(a, b) for a, b in zip(mine, theirs, strict=True)):
            raise ValueError(f"the stored table {name!r} does not match the statistics")


def _parts(table: TableValue) -> Sequence[object]:
    """A list table's arrays, or the one array (or scalar) of another table."""
    return table if isinstance(table, list) else [table]


def _close(computed: object, stored: object) -> bool:
    """Equal values to rounding (a scalar is stored as an array of one)."""
    mine, theirs = np.asarray(computed), np.asarray(stored)
    if mine.shape != theirs.shape and mine.size != 1:
        return False
    return mine.size == theirs.size and bool(np.allclose(mine.ravel(), theirs.ravel(), rtol=1e-9, atol=0))
