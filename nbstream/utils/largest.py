"""The entries of largest magnitude of each row, in order, without sorting whole rows: a prediction's
few largest feature contributions among hundreds or millions.

Every function here orders a row's entries by decreasing |value|, ties by the smaller column, leaves
out entries that are exactly 0, and pads a row with fewer entries with column -1 and value 0.0.

A dense row of m entries is not sorted: the k-th largest of the maxima of at least 4k groups of its
entries is at most its k-th largest entry, so only the entries at or above it (about k to 2k) are
sorted. Cells (a sparse row's entries) are sorted in a matrix padded to the longest row of rows of
like length.
"""

from __future__ import annotations

import numpy as np

from .ndarrays import FloatArray, IndexArray, IntArray

_GROUPS_PER_ENTRY = 4  # a dense row is cut into at least this many groups per entry wanted


def largest_of_rows(values: FloatArray, k: int) -> tuple[IntArray, FloatArray]:
    """The k entries of largest |value| of each row of values (n, m): (columns (n, k) int64,
    values (n, k)) in decreasing |value|, ties by the smaller column, zeros left out and padded.

    >>> columns, top = largest_of_rows(np.array([[0.5, -2.0, 0.0, 2.0], [0.0, 0.0, 1.0, 0.0]]), 3)
    >>> columns.tolist(), top.tolist()
    ([[1, 3, 0], [2, -1, -1]], [[-2.0, 2.0, 0.5], [1.0, 0.0, 0.0]])
    """
    n_rows, n_columns = values.shape
    magnitudes = np.abs(values)
    if _GROUPS_PER_ENTRY * k >= n_columns:
        order = np.argsort(-magnitudes, axis=1, kind="stable")[:, :k]  # stable: ties by column
        return _padded(order, np.take_along_axis(values, order, axis=1), k)
    floor = np.maximum(_kth_largest_at_least(magnitudes, k), np.finfo(np.float64).tiny)
    flat = np.flatnonzero(magnitudes >= floor[:, None])  # by row, then column
    rows, columns = np.divmod(flat, n_columns)
    return largest_of_cells(rows, columns, values.reshape(-1)[flat], n_rows, k)


def _kth_largest_at_least(magnitudes: FloatArray, k: int) -> FloatArray:
    """A lower bound of the k-th largest entry of each row of magnitudes (n, m), m > 4k, shape (n,):
    the k-th largest maximum of 4k to 8k groups of a row's entries (k entries, each in its own
    group, are at least as large). The groups are the columns congruent modulo their count, found
    by halving the rows: one pass over the entries."""
    maxima = magnitudes
    while maxima.shape[1] // 2 >= _GROUPS_PER_ENTRY * k:
        half = maxima.shape[1] // 2
        folded = np.maximum(maxima[:, :half], maxima[:, half:2 * half])
        if maxima.shape[1] % 2:
            np.maximum(folded[:, 0], maxima[:, -1], out=folded[:, 0])
        maxima = folded
    n_groups = maxima.shape[1]
    kth: FloatArray = np.partition(maxima, n_groups - k, axis=1)[:, n_groups - k]
    return kth


def largest_of_cells(rows: IndexArray, columns: IndexArray, values: FloatArray, n_rows: int,
                     k: int | None) -> tuple[IntArray, FloatArray]:
    """The k entries of largest |value| of each of n_rows rows given as cells, each (n_cells,) (rows
    non-decreasing, columns increasing within a row: CSR order): (columns (n_rows, k), values
    (n_rows, k)) ordered, zeros left out and padded. k None: every nonzero entry, k being the most
    a row has.

    >>> largest_of_cells(np.array([0, 0, 2]), np.array([4, 9, 1]), np.array([1.0, -3.0, 2.0]), 3, 1)
    (array([[ 9],
           [-1],
           [ 1]]), array([[-3.],
           [ 0.],
           [ 2.]]))
    """
    nonzero = values != 0
    if not nonzero.all():
        rows, columns, values = rows[nonzero], columns[nonzero], values[nonzero]
    per_row = np.bincount(rows, minlength=n_rows)
    width = int(per_row.max(initial=0)) if k is None else k
    starts = np.cumsum(per_row) - per_row
    groups = _rows_of_like_length(per_row)
    if groups is None:  # one matrix for all the rows
        return _ordered_cells(columns, values, per_row, width)
    top_columns = np.full((n_rows, width), -1, dtype=np.int64)
    top_values = np.zeros((n_rows, width))
    for like_rows in groups:
        cells = cells_of_rows(starts[like_rows], per_row[like_rows])
        found_columns, found_values = _ordered_cells(columns[cells], values[cells], per_row[like_rows], width)
        top_columns[like_rows], top_values[like_rows] = found_columns, found_values
    return top_columns, top_values


def _rows_of_like_length(per_row: IndexArray) -> list[IndexArray] | None:
    """The rows with entries in groups whose lengths are within a factor 2, so that no matrix padded to
    a group's longest row is much larger than its cells; None when one matrix of all rows is not."""
    if per_row.max(initial=0) * len(per_row) <= 2 * per_row.sum() + 1024:
        return None
    filled = np.flatnonzero(per_row)
    scale = np.log2(per_row[filled]).astype(np.int64)
    return [filled[scale == value] for value in np.unique(scale)]


def cells_of_rows(starts: IndexArray, counts: IndexArray) -> IndexArray:
    """The positions of the cells of some rows, row after row, among cells grouped by row: starts
    and counts (n_chosen,) where each chosen row's cells begin and how many it has.

    >>> cells_of_rows(np.array([5, 0]), np.array([2, 1])).tolist()
    [5, 6, 0]
    """
    offsets = np.repeat(starts - (np.cumsum(counts) - counts), counts)
    cells: IndexArray = np.arange(int(counts.sum())) + offsets
    return cells


def _ordered_cells(columns: IndexArray, values: FloatArray, counts: IndexArray,
                   width: int) -> tuple[IntArray, FloatArray]:
    """The first ``width`` cells of each row in order, padded (columns (n_rows, width), values
    (n_rows, width)), of cells (columns and values (n_cells,), grouped by row, columns increasing,
    none 0; counts (n_rows,) the cells of each row)."""
    n_rows, longest = len(counts), int(counts.max(initial=0))
    slots = np.arange(len(columns)) + np.repeat(np.arange(n_rows) * longest - (np.cumsum(counts) - counts), counts)
    keys = np.zeros(n_rows * longest)  # -|value|; past a row's cells 0, which no cell is: last
    keys[slots] = -np.abs(values)
    order = np.argsort(keys.reshape(n_rows, longest), axis=1, kind="stable")[:, :width]  # stable: by column
    cells = np.full(n_rows * longest + 1, -1, dtype=np.intp)  # the last: what padding points to
    cells[slots] = np.arange(len(columns))
    found = np.take_along_axis(cells[:-1].reshape(n_rows, longest), order, axis=1)
    padded_columns = np.full((n_rows, width), -1, dtype=np.int64)
    padded_values = np.zeros((n_rows, width))
    padded_columns[:, :found.shape[1]] = np.append(columns, -1)[found]
    padded_values[:, :found.shape[1]] = np.append(values, 0.0)[found]
    return padded_columns, padded_values


def _padded(columns: IndexArray, values: FloatArray, width: int) -> tuple[IntArray, FloatArray]:
    """Columns and values (n, m) of width at least m: columns as int64, -1 where the value is 0 and
    in the columns added, whose values are 0.0."""
    zero = values == 0
    padded_columns = np.full((len(columns), width), -1, dtype=np.int64)
    padded_values = np.zeros((len(columns), width))
    padded_columns[:, :columns.shape[1]] = np.where(zero, -1, columns)
    padded_values[:, :columns.shape[1]] = np.where(zero, 0.0, values)
    return padded_columns, padded_values


def merged_largest(first: tuple[IntArray, FloatArray], second: tuple[IntArray, FloatArray],
                   k: int | None) -> tuple[IntArray, FloatArray]:
    """Two ordered, padded results of distinct columns (columns (n, k1), values (n, k1); (n, k2))
    merged into one of width k (None: k1 + k2, trimmed to the most entries of a row), ordered."""
    columns = np.concatenate([first[0], second[0]], axis=1)
    values = np.concatenate([first[1], second[1]], axis=1)
    padding = columns < 0
    order = np.lexsort((np.where(padding, np.iinfo(np.int64).max, columns), -np.abs(values)), axis=1)
    width = int((~padding).sum(axis=1).max(initial=0)) if k is None else k
    order = order[:, :width]
    merged_columns = np.take_along_axis(columns, order, axis=1)
    merged_values = np.take_along_axis(values, order, axis=1)
    if merged_columns.shape[1] < width:
        extra = width - merged_columns.shape[1]
        merged_columns = np.pad(merged_columns, ((0, 0), (0, extra)), constant_values=-1)
        merged_values = np.pad(merged_values, ((0, 0), (0, extra)))
    return merged_columns, merged_values
