"""The test-then-train sums of MultinomialNB and ComplementNB by compiled loops
(``nbstream.utils.compiled``): for each row i and class c, sum_f x_if log(count of (c, f) before
row i + alpha_f), where a learned row of class d adds weight * x to the counts of class d
(MultinomialNB's) or to those of every class but d (ComplementNB's complement counts).

The rows are taken in order by a loop that copies each nonzero cell's counts (every class) out of
a table, then adds the row to the table if it is learned: a row's cells cost a few nanoseconds a
class, where sorting the batch's cells by feature and summing them in numpy costs several passes
over (classes x cells) arrays. numpy then takes the logarithms of a chunk of cells
at once (its vectorised log is several times faster than one value at a time), and a second loop
sums each row's cells weighted by their values, in the order of their features, as the numpy
path does. Whole counts below 2**53 are exact in float64, so with an alpha that adds to them
exactly (1.0, say) each logarithm is of the same number as in the numpy path; otherwise the two
may round differently in the last digit (ComplementNB's numpy path subtracts a class's count from
the total, these loops add up the other classes').
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..stats.counts import DiscreteCounts
from ..stats.sparse_counts import PairCounts
from ..utils.compiled import Kernel, worth_compiling
from ..utils.distinct import distinct_and_places
from ..utils.ndarrays import AnyArray, Features, FloatArray, IndexArray
from ..utils.validation import is_sparse
from .counts import CountsAt, LearnedRows, csr_cells

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
            if X.dtype.kind not in "biuf" or X.dtype == np.float16 or not X.dtype.isnative:
                X = X.astype(np.float64)  # a type the loops are not compiled for
            row_starts, places, values = _dense_cells(np.ascontiguousarray(X))
            return cls(row_starts, places, values, np.arange(X.shape[1], dtype=np.intp))
        row_starts, features, values = csr_cells(X)
        distinct, places = distinct_and_places(features)
        return cls(row_starts, places, values, distinct)


def compiled_log_count_sums(X: Features, statistics: DiscreteCounts | PairCounts, learned: LearnedRows,
                            alpha: float | FloatArray,
                            complement_of: Callable[[FloatArray], FloatArray] | None = None) -> FloatArray | None:
    """``log_count_sums`` of a batch (n_samples, n_features), dense or CSR, under the statistics'
    counts: MultinomialNB's, or with ``complement_of`` (which turns every class's counts at the
    batch's features, (n_classes, n_places), into their complement counts) ComplementNB's. None
    where the compiled loops are not installed or switched off, or where the table of counts at
    the batch's features would exceed MOST_TABLE_VALUES: the caller takes its numpy path."""
    n_cells = X.nnz if is_sparse(X) else X.size  # a dense batch's cells, zeros included: an upper bound
    if not worth_compiling(n_cells) or (not is_sparse(X) and learned.n_classes * X.shape[1] > MOST_TABLE_VALUES):
        return None
    cells = RowCells.of(X)
    if learned.n_classes * len(cells.distinct) > MOST_TABLE_VALUES:
        return None
    counts = CountsAt(statistics, cells.distinct).of_classes(slice(0, learned.n_classes))
    if complement_of is not None:
        counts = complement_of(counts)
    smoothing = np.full(len(cells.distinct), float(alpha)) if np.ndim(alpha) == 0 \
        else np.asarray(alpha, dtype=np.float64)[cells.distinct]
    return log_count_sums(cells, learned, np.ascontiguousarray(counts.T), smoothing,
                          complement=complement_of is not None)


def log_count_sums(cells: RowCells, learned: LearnedRows, counts: FloatArray, alpha: FloatArray, *,
                   complement: bool) -> FloatArray:
    """sum_f x_if log(count_cf + alpha_f) of each row i and class c, each row's counts being those
    of the table plus what the rows before it learned: to their own class's counts, or with
    ``complement`` to every other class's.

    counts : (n_places, n_classes) the counts at the places of ``cells`` before the batch, a
    place's classes side by side, changed (it ends as the counts after the batch); alpha :
    (n_places,) the smoothing of each place.
    Returns (n_samples, n_classes).
    """
    n_rows, n_classes = len(learned), counts.shape[1]
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
        _copy_then_learn(cells.row_starts, cells.places, cells.values, learned.rows, learned.weights, counts, alpha,
                         complement, begin, end, logged)
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
                          weights: FloatArray, counts: FloatArray, alpha: FloatArray, complement: bool, begin: int,
                          end: int, out: FloatArray) -> None:
    """For rows begin..end in order: out[cell - first cell, c] = counts[place, c] + alpha[place] of
    each of the row's cells; then, for a learned row (class d >= 0), weight * value added to
    counts[place, d], or with ``complement`` to counts[place, c] of every class c but d."""
    n_classes = counts.shape[1]
    first = row_starts[begin]
    for i in range(begin, end):
        for k in range(row_starts[i], row_starts[i + 1]):
            place = places[k]
            smoothing = alpha[place]
            for c in range(n_classes):
                out[k - first, c] = counts[place, c] + smoothing
        learned_as = classes[i]
        if learned_as < 0:
            continue
        weight = weights[i]
        for k in range(row_starts[i], row_starts[i + 1]):
            place = places[k]
            amount = weight * values[k]
            if not complement:
                counts[place, learned_as] += amount
                continue
            for c in range(n_classes):
                if c != learned_as:
                    counts[place, c] += amount


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
