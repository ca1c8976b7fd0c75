"""ComplementNB's test-then-train sums by compiled loops (``nbstream.utils.compiled``): for each
row i and class c, sum_f x_if log(complement count of (c, f) before row i), where a learned row of
class d adds weight * x to the complement counts of every class but d.

The rows are taken in order by a loop that copies each nonzero cell's complement counts (every
class) out of a table, then adds the row to the table if it is learned: a row's cells cost a few
nanoseconds a class, where sorting the batch's cells by feature and summing them in numpy costs
several passes over (classes x cells) arrays. numpy then takes the logarithms of a chunk of cells
at once (its vectorised log is several times faster than one value at a time), and a second loop
sums each row's cells weighted by their values, in the order of their features, as the numpy
path does. Whole counts below 2**53 are exact in float64, so each logarithm is of the same number
as in the numpy path.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..utils.compiled import Kernel
from ..utils.ndarrays import AnyArray, Features, FloatArray, IndexArray
from ..utils.validation import is_sparse
from .counts import LearnedRows

MOST_TABLE_VALUES = 1 << 22  # classes x distinct features of the complement table (32 MB); beyond, the numpy path
CHUNK_VALUES = 1 << 16  # cells x classes logged at once (512 KB): they stay in cache between the loops


@dataclass
class RowCells:
    """The nonzero cells of a batch, row by row, each feature once a row.

    row_starts : (n_samples + 1,) where each row's cells begin
    places : (nnz,) each cell's feature as its place in ``distinct``
    values : (nnz,) float64
    distinct : (n_places,) the features the places stand for, increasing (every feature for dense rows)
    """

    row_starts: IndexArray
    places: IndexArray
    values: FloatArray
    distinct: IndexArray

    @classmethod
    def of(cls, X: Features) -> RowCells:
        """The cells of dense rows (n_samples, n_features), or of CSR rows."""
        if not is_sparse(X):
            row_starts, places, values = _dense_cells(np.ascontiguousarray(X))
            return cls(row_starts, places, values, np.arange(X.shape[1], dtype=np.intp))
        if not X.has_canonical_format:  # a feature twice in a row would be before itself
            X = X.copy()
            X.sum_duplicates()
        distinct, places = np.unique(np.asarray(X.indices), return_inverse=True)
        return cls(np.asarray(X.indptr, dtype=np.intp), places.astype(np.intp),
                   np.asarray(X.data, dtype=np.float64), distinct.astype(np.intp))


def complement_log_sums(cells: RowCells, learned: LearnedRows, complement: FloatArray) -> FloatArray:
    """sum_f x_if log(complement_cf) of each row i and class c, each row's complement counts being
    those of the table plus the rows before it learned as another class.

    complement : (n_classes, n_places) the complement counts (smoothing included) at the places
    of ``cells`` before the batch; it is changed (it ends as the counts after the batch). Returns
    (n_samples, n_classes).
    """
    n_rows, n_classes = len(learned), complement.shape[0]
    sums = np.empty((n_rows, n_classes))
    scratch = np.empty(max(CHUNK_VALUES, n_classes))
    cells_per_chunk = max(1, CHUNK_VALUES // n_classes)
    begin = 0
    while begin < n_rows:  # rows of about CHUNK_VALUES cell values, a row at least
        end = int(np.searchsorted(cells.row_starts, cells.row_starts[begin] + cells_per_chunk, side="right")) - 1
        end = min(max(end, begin + 1), n_rows)
        n_cells = int(cells.row_starts[end] - cells.row_starts[begin])
        logged = scratch[:n_cells * n_classes].reshape(n_cells, n_classes) if n_cells * n_classes <= len(scratch) \
            else np.empty((n_cells, n_classes))
        _copy_then_learn(cells.row_starts, cells.places, cells.values, learned.rows, learned.weights, complement,
                         begin, end, logged)
        np.log(logged, out=logged)
        _weighted_row_sums(cells.row_starts, cells.values, logged, begin, end, sums)
        begin = end
    return sums


def _dense_cells_loop(X: AnyArray) -> tuple[IndexArray, IndexArray, FloatArray]:
    """(row starts (n_rows + 1,), features (nnz,), values (nnz,) float64) of the nonzero cells of
    X (n_rows, n_features), row by row."""
    n_rows, n_features = X.shape
    row_starts = np.zeros(n_rows + 1, np.intp)
    count = 0
    for i in range(n_rows):
        for f in range(n_features):
            if X[i, f] != 0:
                count += 1
        row_starts[i + 1] = count
    features = np.empty(count, np.intp)
    values = np.empty(count, np.float64)
    k = 0
    for i in range(n_rows):
        for f in range(n_features):
            value = X[i, f]
            if value != 0:
                features[k] = f
                values[k] = value
                k += 1
    return row_starts, features, values


def _copy_then_learn_loop(row_starts: IndexArray, places: IndexArray, values: FloatArray, classes: IndexArray,  # noqa: PLR0913
                          weights: FloatArray, complement: FloatArray, begin: int, end: int,
                          out: FloatArray) -> None:
    """For rows begin..end in order: out[cell - first cell, c] = complement[c, place] of each of
    the row's cells; then, for a learned row (class d >= 0), weight * value added to
    complement[c, place] of every class c but d."""
    n_classes = complement.shape[0]
    first = row_starts[begin]
    for i in range(begin, end):
        for k in range(row_starts[i], row_starts[i + 1]):
            place = places[k]
            for c in range(n_classes):
                out[k - first, c] = complement[c, place]
        learned_as = classes[i]
        if learned_as >= 0:
            weight = weights[i]
            for k in range(row_starts[i], row_starts[i + 1]):
                place = places[k]
                amount = weight * values[k]
                for c in range(n_classes):
                    if c != learned_as:
                        complement[c, place] += amount


def _weighted_row_sums_loop(row_starts: IndexArray, values: FloatArray, logged: FloatArray, begin: int, end: int,
                            sums: FloatArray) -> None:
    """sums[i, c] = the sum over row i's cells k of values[k] * logged[k - first cell, c], for rows
    begin..end, cells in order."""
    n_classes = logged.shape[1]
    first = row_starts[begin]
    for i in range(begin, end):
        for c in range(n_classes):
            sums[i, c] = 0.0
        for k in range(row_starts[i], row_starts[i + 1]):
            value = values[k]
            for c in range(n_classes):
                sums[i, c] += value * logged[k - first, c]


_dense_cells = Kernel(_dense_cells_loop)
_copy_then_learn = Kernel(_copy_then_learn_loop)
_weighted_row_sums = Kernel(_weighted_row_sums_loop)
