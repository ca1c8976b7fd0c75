"""What each row of a batch sees of the rows learned before it, in bulk: the machinery of the
count models' test-then-train scores (``predict_proba_prequential``).

Row i of a batch is scored by the statistics plus the learned rows j < i. The count models'
scores need two kinds of sums over those earlier rows:

- per row and class (``LearnedRows.before``): the weight of the class, its feature total, ...
- per nonzero cell (i, f) of the batch and class (``BatchCells.counts_before``): the class's
  count of feature f, the statistics' plus the earlier rows learned as that class. Only the
  cells of row i enter its multinomial or complement score, so that is computed at
  nnz x n_classes cells rather than for every feature.

Cells are ordered by feature, then row, so that each feature's cells are contiguous: a
segmented prefix sum over them gives every cell's counts at once. Classes are taken in
chunks so that the (chunk, nnz) arrays stay bounded whatever the number of classes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np

from ..stats.counts import DiscreteCounts
from ..stats.sparse_counts import PairCounts
from ..utils.ndarrays import AnyArray, Features, FloatArray, IndexArray, IntArray
from ..utils.segment_sums import segment_sums_before
from ..utils.validation import is_sparse

CELLS_PER_CHUNK = 1 << 21  # (classes x cells) values per array of one chunk of classes: 16 MB
_EXACT_INTEGERS = 2.0**52  # whole counts below this are summed in int64 and are exact in float64


class LearnedRows:
    """Which rows of a batch are learned, as which class and with which weight.

    rows : (n_samples,) the class row of each row to learn, -1 for rows only scored
    weights : (n_samples,) the weight of each row (None: 1 for every row)
    n_classes : the classes of the batch's model, those new in the batch included
    """

    def __init__(self, rows: IndexArray, weights: FloatArray | None, n_classes: int):
        self.rows = rows
        self.n_classes = n_classes
        self.learned = rows >= 0
        self.unit_weights = weights is None
        weight = np.ones(len(rows)) if weights is None else np.asarray(weights, dtype=np.float64)
        self.weights: FloatArray = np.where(self.learned, weight, 0.0)
        self.every_row_once = weights is None and bool(self.learned.all())  # every row learned, with weight 1

    def __len__(self) -> int:
        return len(self.rows)

    def before(self, values: FloatArray | None = None) -> FloatArray:
        """Per row and class, the sum of weight * value over the rows before it learned as that
        class, shape (n_samples, n_classes); values : (n_samples,), default 1 (class weights)."""
        amounts = self.weights if values is None else self.weights * values
        per_class = np.zeros((len(self.rows), self.n_classes))
        learned = np.flatnonzero(self.learned)
        per_class[learned, self.rows[learned]] = amounts[learned]
        return sums_before(per_class)

    def versions(self) -> IndexArray:
        """Per row and class, how many rows of that class were learned before it, shape
        (n_samples, n_classes): the version of the class's statistics that scores the row."""
        counts = np.zeros((len(self.rows) + 1, self.n_classes), dtype=np.intp)
        learned = np.flatnonzero(self.learned)
        counts[learned + 1, self.rows[learned]] = 1
        np.cumsum(counts, axis=0, out=counts)
        return counts[:-1]

    def classes_known(self, declared: int) -> IndexArray:
        """How many classes the model knows when each row is scored, shape (n_samples,): the
        ``declared`` ones, and the new ones (appended in order of first appearance) taught
        before it."""
        taught = np.where(self.learned, self.rows + 1, 0)
        before = np.maximum.accumulate(np.r_[0, taught[:-1]]) if len(taught) else taught
        known: IndexArray = np.maximum(before, declared)
        return known


def sums_before(per_row: FloatArray) -> FloatArray:
    """The sum of the rows before each row, shape (n_samples, k) of per_row (n_samples, k)."""
    sums = np.zeros((per_row.shape[0] + 1, per_row.shape[1]))
    np.cumsum(per_row, axis=0, out=sums[1:])
    return sums[:-1]


class BatchCells:
    """The nonzero cells of a batch, ordered by feature, then row, and for each cell its feature's
    counts before its row.

    rows, values : (nnz,) each cell's row and value (float64)
    distinct : (n_distinct,) the batch's distinct features, increasing
    place : (nnz,) each cell's feature as its place in ``distinct`` (non-decreasing)
    classes : (nnz,) the class each cell's row teaches, -1 for rows only scored
    amounts : (nnz,) what each cell adds to that class's count (weight * value), 0 for rows only scored
    taught : (n_taught,) the cells of learned rows
    """

    def __init__(self, X: Features, learned: LearnedRows):
        row_starts, features, values = _cells_of(X)
        self.n_rows = X.shape[0]
        nnz = len(values)
        keys = features.astype(np.int64) << 32
        keys |= np.arange(nnz)  # a cell's place in row-major order: its row's order
        keys.sort()
        order = (keys & 0xFFFFFFFF).astype(np.intp)
        self.rows: IndexArray = np.repeat(np.arange(self.n_rows), np.diff(row_starts))[order]
        self.values: FloatArray = values[order]
        sorted_features = keys >> 32
        starts_feature = np.r_[True, sorted_features[1:] != sorted_features[:-1]] if nnz else np.zeros(0, bool)
        self._feature_starts: IndexArray = np.flatnonzero(starts_feature)
        self.distinct: IndexArray = sorted_features[self._feature_starts].astype(np.intp)
        self.place: IndexArray = np.cumsum(starts_feature, dtype=np.intp) - 1
        self.classes: IndexArray = learned.rows[self.rows]
        every_cell = learned.every_row_once
        self.amounts: FloatArray = self.values if every_cell else self.values * learned.weights[self.rows]
        self.taught: IndexArray = np.arange(nnz) if every_cell else np.flatnonzero(self.classes >= 0)
        self._taught_classes = self.classes if every_cell else self.classes[self.taught]
        amounts = self.amounts if every_cell else self.amounts[self.taught]
        whole = learned.unit_weights and bool(np.array_equal(amounts, np.rint(amounts))) \
            and float(np.abs(amounts).sum()) < _EXACT_INTEGERS
        self._summed: FloatArray | IntArray = amounts.astype(np.int64) if whole else amounts
        self._by_class: tuple[IndexArray, IndexArray] | None = None  # made when classes come in chunks

    @property
    def features(self) -> IndexArray:
        """(nnz,) each cell's feature."""
        return self.distinct[self.place]

    def __len__(self) -> int:
        return len(self.values)

    def class_chunks(self, n_classes: int) -> Iterator[slice]:
        """Consecutive ranges of classes whose (chunk, nnz) arrays hold about CELLS_PER_CHUNK values."""
        step = max(1, CELLS_PER_CHUNK // max(len(self), 1))
        for start in range(0, n_classes, step):
            yield slice(start, min(start + step, n_classes))

    def counts_before(self, classes: slice, held: FloatArray) -> FloatArray:
        """Per class of the range and cell (i, f), the class's count of feature f before row i:
        held (n_chunk_classes, n_distinct), the statistics' counts of the batch's features, plus
        weight * x_f of the rows before i learned as that class; shape (n_chunk_classes, nnz)."""
        taught_classes = self._taught_classes
        if classes.start == 0 and classes.stop > taught_classes.max(initial=-1):
            return self._sums_before(taught_classes, self.taught, self._summed, held)
        if self._by_class is None:  # the learned cells by class, each class's in their order
            order = np.argsort(taught_classes.astype(np.int16) if taught_classes.max(initial=0) < 1 << 15
                               else taught_classes, kind="stable")  # 16-bit keys: a radix sort
            self._by_class = order, taught_classes[order]
        order, sorted_classes = self._by_class
        mine = order[np.searchsorted(sorted_classes, classes.start):np.searchsorted(sorted_classes, classes.stop)]
        return self._sums_before(taught_classes[mine] - classes.start, self.taught[mine], self._summed[mine], held)

    def totals_before(self, held: FloatArray) -> FloatArray:
        """Per cell (i, f), the count of feature f over all classes before row i: held (n_distinct,)
        the statistics' plus weight * x_f of every learned row before i; shape (nnz,)."""
        totals: FloatArray = self._sums_before(np.zeros(len(self.taught), dtype=np.intp), self.taught, self._summed,
                                               held[None, :])[0]
        return totals

    def row_sums(self, cell_values: FloatArray) -> FloatArray:
        """The sum of each row's cells, shape (n_samples, k), of cell_values (k, nnz)."""
        sums = np.empty((self.n_rows, cell_values.shape[0]))
        for column, values in enumerate(cell_values):
            sums[:, column] = np.bincount(self.rows, weights=values, minlength=self.n_rows)
        return sums

    def _sums_before(self, classes: IndexArray, at: IndexArray, amounts: FloatArray | IntArray,
                     held: FloatArray) -> FloatArray:
        """Per class and cell, held (n_classes, n_distinct) at the cell's feature plus the amounts
        placed at (class, cell) of the earlier cells of the same feature, shape (n_classes, nnz).

        Whole amounts and counts are summed in int64: exact, and a cumulative sum that vectorizes.
        Other amounts are summed in float64 from 0 at each feature, so that the rounding stays
        that of the feature's own amounts, then added to the held counts."""
        n_classes, nnz = held.shape[0], len(self)
        whole = amounts.dtype.kind == "i" and bool(np.array_equal(held, np.rint(held))) \
            and float(np.abs(held).max(initial=0)) < _EXACT_INTEGERS
        placed = np.zeros((n_classes, nnz + 1), dtype=np.int64 if whole else np.float64)
        placed.ravel()[classes * (nnz + 1) + at + 1] = amounts
        return segment_sums_before(placed, self._feature_starts, axis=1, start=held)


def csr_cells(X: Features) -> tuple[IndexArray, IndexArray, FloatArray]:
    """(row starts (n_samples + 1,), features (nnz,), values (nnz,) float64) of CSR rows, each
    feature once a row (duplicates summed: a feature twice in a row would be before itself)."""
    if not X.has_canonical_format:
        X = X.copy()
        X.sum_duplicates()
    return (np.asarray(X.indptr, dtype=np.intp), np.asarray(X.indices, dtype=np.intp),
            np.asarray(X.data, dtype=np.float64))


def _cells_of(X: Features) -> tuple[IndexArray, IndexArray, FloatArray]:
    """(row starts (n_samples + 1,), features (nnz,), values (nnz,) float64) of X's nonzero
    cells, row by row, each feature once a row; CSR keeps its explicit zeros (they add nothing)."""
    if is_sparse(X):
        return csr_cells(X)
    at = np.flatnonzero(X if X.dtype == np.bool_ else X != 0)  # a bool array is searched faster
    rows, features = np.divmod(at, X.shape[1])
    starts = np.searchsorted(rows, np.arange(X.shape[0] + 1)).astype(np.intp)
    return starts, features, np.take(X.reshape(-1), at).astype(np.float64)


class CountsAt:
    """What the statistics hold at a batch's distinct features, class chunk by class chunk.

    Classes beyond the statistics' (new in the batch) have counts 0."""

    def __init__(self, statistics: DiscreteCounts | PairCounts, features: IndexArray):
        self._features = features
        self._dense = statistics.feature_count if isinstance(statistics, DiscreteCounts) else None
        self._pairs = statistics.pairs_of(features) if isinstance(statistics, PairCounts) else None

    def of_classes(self, classes: slice) -> FloatArray:
        """Counts of the chunk's classes at the features, shape (n_chunk_classes, n_features)."""
        table = np.zeros((classes.stop - classes.start, len(self._features)))
        if self._dense is not None:
            held = self._dense[classes.start:min(classes.stop, len(self._dense))]
            table[:len(held)] = held[:, self._features]
        elif self._pairs is not None:
            places, pair_classes, counts = self._pairs
            mine = (pair_classes >= classes.start) & (pair_classes < classes.stop)
            table[pair_classes[mine] - classes.start, places[mine]] = counts[mine]
        return table

    def all_classes(self) -> FloatArray:
        """Counts summed over every class at the features, shape (n_features,)."""
        if self._dense is not None:
            return np.asarray(self._dense[:, self._features].sum(axis=0), dtype=np.float64)
        assert self._pairs is not None
        places, _, counts = self._pairs
        return np.bincount(places, weights=counts, minlength=len(self._features)).astype(np.float64)


def class_weights_before(statistics: DiscreteCounts | PairCounts, learned: LearnedRows) -> FloatArray:
    """Per row and class, the class's weight in the model that scores the row, shape
    (n_samples, n_classes)."""
    weights = learned.before()
    held = statistics.class_count
    weights[:, :len(held)] += held
    return weights


def feature_totals_before(statistics: DiscreteCounts | PairCounts, learned: LearnedRows,
                          sizes: FloatArray) -> FloatArray:
    """Per row and class, the sum of the class's feature counts in the model that scores the row,
    shape (n_samples, n_classes); sizes : (n_samples,) the sum of each row's features."""
    totals = learned.before(sizes)
    held = statistics.class_feature_totals() if isinstance(statistics, PairCounts) \
        else statistics.feature_count.sum(axis=1)
    totals[:, :len(held)] += held
    return totals


def dense_counts(statistics: DiscreteCounts | PairCounts, n_classes: int, n_features: int) -> FloatArray:
    """The statistics' counts as a (n_classes, n_features) table, 0 for classes new in the batch."""
    held = statistics.feature_count if isinstance(statistics, DiscreteCounts) else statistics.to_dense(n_features)
    table = np.zeros((n_classes, n_features))
    table[:len(held)] = held
    return table


def padded(values: FloatArray, n_classes: int) -> FloatArray:
    """Per-class values (n_held,) with 0 for the classes new in the batch, shape (n_classes,)."""
    table = np.zeros(n_classes)
    table[:len(values)] = values
    return table


# The term of each group of features at versions of these class weights (n_versions,), shape
# (n_groups, n_versions).
GroupTerm = Callable[[FloatArray], FloatArray]


def version_sums(start: IntArray, moved_at: IndexArray, moved_from: IndexArray, moved_to: IndexArray,
                 class_weights: FloatArray, term: GroupTerm) -> FloatArray:
    """A sum over every feature of a term of its count, at each version of one class's counts,
    shape (n_versions,): features are taken in groups of equal counts (and smoothing), the
    version's sum being sum_g (features in g) * term(g).

    start : (n_groups,) the features in each group at version 0
    moved_at, moved_from, moved_to : (n_moves,) a feature leaves group moved_from for moved_to
        at version moved_at (>= 1: the version the learned row makes)
    class_weights : (n_versions,) the class's weight at each version, passed to term

    Costs n_groups x n_versions: few groups for whole counts, as many as features otherwise.
    """
    n_groups, n_versions = len(start), len(class_weights)
    sums = np.empty(n_versions)
    step = max(1, CELLS_PER_CHUNK // max(n_groups, 1))
    in_groups = start.astype(np.int64)
    for first in range(0, n_versions, step):
        last = min(first + step, n_versions)
        mine = (moved_at >= first) & (moved_at < last)
        counts = np.zeros((n_groups, last - first), dtype=np.int64)  # features in each group at each version
        np.add.at(counts.reshape(-1), moved_to[mine] * (last - first) + moved_at[mine] - first, 1)
        np.add.at(counts.reshape(-1), moved_from[mine] * (last - first) + moved_at[mine] - first, -1)
        counts[:, 0] += in_groups
        np.cumsum(counts, axis=1, out=counts)
        terms = term(class_weights[first:last])
        terms *= counts  # a group empty at a version may have no term there (NaN): left out of the sum
        sums[first:last] = np.sum(terms, axis=0, where=counts != 0)
        in_groups = counts[:, -1]
    return sums


def by_class(classes: IndexArray, n_classes: int, *arrays: AnyArray) -> list[tuple[AnyArray, ...]]:
    """The arrays' elements (each (n,), like classes) of each class, in their order: a list of
    n_classes tuples of arrays."""
    order = np.argsort(classes, kind="stable")
    bounds = np.searchsorted(classes[order], np.arange(1, n_classes))
    return list(zip(*(np.split(array[order], bounds) for array in arrays), strict=True))
