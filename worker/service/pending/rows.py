"""The columns of pending examples, kept compact until their labels come.

Feature rows come as the feature encoder gives them (``FeatureEncoder.encode``): a dense array
(n, d) in the column's own dtype (uint8 pixels read from Arrow, float64 numbers read from JSON,
int64 category codes), or a CSR matrix (n, 2**hash_bits) of float64 counts for text. A block
keeps the values in the narrowest integer dtype that holds every one of them exactly (JSON's
float64 pixels as uint8, a text's counts as uint8) and gives them back in the dtype they came in.

The other columns (served class, probabilities, offsets) are plain numpy arrays; ``take`` and
``concatenate`` work on both kinds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeAlias

import numpy as np

from nbstream.utils.ndarrays import AnyArray, Features, IntArray

# Integer dtypes a block may store its values in, smallest first.
_NARROW = tuple(np.dtype(name) for name in ("u1", "i1", "u2", "i2", "u4", "i4"))


def narrowest(values: AnyArray) -> AnyArray:
    """``values`` in the smallest integer dtype that holds each of them exactly and casts safely
    back to their own dtype (so 0.5, -0.0, NaN and 300 keep a float64 array as it is)."""
    if values.size == 0 or values.dtype.kind not in "iuf":
        return values
    low, high = values.min(), values.max()
    for dtype in _NARROW:
        if dtype.itemsize >= values.dtype.itemsize:
            break
        info = np.iinfo(dtype)
        if not (np.can_cast(dtype, values.dtype, "safe") and info.min <= low and high <= info.max):
            continue
        narrow = values.astype(dtype)
        if values.dtype.kind == "f" and not _same_bits(narrow.astype(values.dtype), values):
            return values  # a fraction or a negative zero: no integer dtype holds it
        return narrow
    return values


def _same_bits(a: AnyArray, b: AnyArray) -> bool:
    unsigned = np.dtype(f"u{a.dtype.itemsize}")
    return bool(np.array_equal(a.view(unsigned), b.view(unsigned)))


@dataclass(frozen=True)
class DenseRows:
    """values : (n, d) in the stored dtype; dtype : the dtype the rows came in (and go back in)."""
    values: AnyArray
    dtype: np.dtype[Any]

    @classmethod
    def of(cls, X: AnyArray) -> DenseRows:
        return cls(narrowest(X), X.dtype)

    def __len__(self) -> int:
        return len(self.values)

    def take(self, positions: IntArray) -> DenseRows:
        return DenseRows(self.values[positions], self.dtype)

    def features(self) -> AnyArray:
        """(n, d) in the dtype the rows came in."""
        return self.values.astype(self.dtype, copy=False)

    @staticmethod
    def concatenate(blocks: list[DenseRows]) -> DenseRows:
        return DenseRows(np.concatenate([block.values for block in blocks]),
                         np.result_type(*(block.dtype for block in blocks)))


@dataclass(frozen=True)
class SparseRows:
    """CSR rows: data (nnz,) in the stored dtype, indices (nnz,) int32 columns, indptr (n + 1,)
    int64 from 0 to nnz, n_features columns in all; dtype : the dtype the data came in (and goes
    back in)."""
    data: AnyArray
    indices: AnyArray
    indptr: IntArray
    n_features: int
    dtype: np.dtype[Any]

    @classmethod
    def of(cls, X: Features) -> SparseRows:
        X = X.tocsr()
        nnz = int(X.indptr[-1])
        return cls(narrowest(X.data[:nnz]), X.indices[:nnz].astype(np.int32, copy=False),
                   X.indptr.astype(np.int64, copy=False), X.shape[1], X.dtype)

    def __len__(self) -> int:
        return len(self.indptr) - 1

    def take(self, positions: IntArray) -> SparseRows:
        taken = self._matrix(self.data)[positions]
        return SparseRows(taken.data, taken.indices.astype(np.int32, copy=False),
                          taken.indptr.astype(np.int64, copy=False), self.n_features, self.dtype)

    def features(self) -> Features:
        """A CSR matrix (n, n_features) with data in the dtype it came in."""
        return self._matrix(self.data.astype(self.dtype, copy=False))

    def _matrix(self, data: AnyArray) -> Features:
        import scipy.sparse

        return scipy.sparse.csr_matrix((data, self.indices, self.indptr), shape=(len(self), self.n_features))

    @staticmethod
    def concatenate(blocks: list[SparseRows]) -> SparseRows:
        starts = np.cumsum([0] + [len(block.data) for block in blocks[:-1]])
        indptr = np.concatenate([np.zeros(1, dtype=np.int64)]
                                + [block.indptr[1:] + start for block, start in zip(blocks, starts, strict=True)])
        return SparseRows(np.concatenate([block.data for block in blocks]),
                          np.concatenate([block.indices for block in blocks]), indptr, blocks[0].n_features,
                          np.result_type(*(block.dtype for block in blocks)))


Rows: TypeAlias = DenseRows | SparseRows
Column: TypeAlias = "AnyArray | Rows"  # a pending column: one entry (or row) per example


def rows_of(X: Features) -> Rows:
    """The block for the encoder's output: a 2-D numpy array, or a scipy.sparse matrix."""
    if isinstance(X, np.ndarray):
        if X.ndim != 2:
            raise ValueError(f"feature rows must be a 2-D array; got {X.ndim} dimensions")
        return DenseRows.of(X)
    return SparseRows.of(X)


def take(column: Column, positions: IntArray) -> Column:
    """The entries of ``column`` at ``positions`` ((k,) int), in that order."""
    return column.take(positions) if isinstance(column, DenseRows | SparseRows) else column[positions]


def concatenate(columns: list[Column]) -> Column:
    """Columns of the same kind one after another. Served probabilities of a class set that grew
    in between have fewer columns: they are padded with zeros (classes are appended, never
    reordered, so column j is the same class in every one)."""
    first = columns[0]
    if isinstance(first, DenseRows | SparseRows):
        return type(first).concatenate(columns)  # type: ignore[arg-type]
    arrays: list[AnyArray] = columns  # type: ignore[assignment]
    if first.ndim == 2:
        width = max(array.shape[1] for array in arrays)
        arrays = [np.pad(array, ((0, 0), (0, width - array.shape[1]))) for array in arrays]
    return np.concatenate(arrays)
