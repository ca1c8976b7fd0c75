"""Sparse sufficient statistics: the weighted counts of the (class, feature) pairs seen.

A text model of 2**22 hashed features and 1,000 classes has 4e9 (class, feature) cells, of
which training fills a few million: a word occurs in few classes. ``PairCounts`` keeps only
the pairs seen, so memory and snapshots grow with what was learned, not with the table. A
pair never seen has count 0, and so a smoothed value every model can write as a per-class
constant: scoring a row is then a product over the pairs its features have (``PairIndex``)
plus per-class terms, exact.

Pairs are kept as int64 keys ``feature << 32 | class``, sorted, so a feature's pairs are
contiguous and the classes can grow without re-keying. New rows are appended to a pending
list and folded in (one sort of the new keys, one merge) before anything reads them.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Self

import numpy as np
import numpy.typing as npt

from ..utils.blocked import class_totals, row_blocks
from ..utils.distinct import distinct_and_places, hashed
from ..utils.ndarrays import AnyArray, Features, FloatArray, IndexArray, IntArray
from ..utils.validation import is_sparse
from .counts import Statistics

MAX_FEATURES = 1 << 31  # a feature index fits the upper half of a key, and int32 in a snapshot
_CLASS_BITS = 32
_CLASS_MASK = (1 << _CLASS_BITS) - 1
_LARGEST_REPEATED = 16  # whole values up to this are summed by repeating their key (_summed_by_key)
_PENDING_FLOOR = 1 << 20  # pending pairs are folded in once they outnumber this and the pairs kept
_LOOKUP_PAIRS_PER_FEATURE = 16  # pairs_of looks pairs up in a table until they outnumber the features this much


def nonzero_cells(X: Features) -> Iterator[tuple[int, IndexArray, AnyArray, FloatArray]]:
    """The nonzero cells of X in blocks of rows: (first row, their rows relative to it, their
    columns, their values as float64). CSR input is one block; dense input is cut into blocks
    of about 2**16 cells."""
    if is_sparse(X):
        values, columns = X.data.astype(np.float64, copy=False), X.indices
        rows = np.repeat(np.arange(X.shape[0]), np.diff(X.indptr))
        if not values.all():  # explicit zeros: no pair
            keep = values != 0
            rows, columns, values = rows[keep], columns[keep], values[keep]
        yield 0, rows, columns, values
        return
    for block in row_blocks(X.shape[0], X.shape[1]):
        rows, columns = np.nonzero(X[block])
        yield block.start, rows, columns, X[block][rows, columns].astype(np.float64)


def pair_keys(features: IntArray, classes: IntArray) -> IntArray:
    """The sorting keys ``feature << 32 | class`` of pairs, shape (n_pairs,) int64."""
    return features.astype(np.int64) << _CLASS_BITS | classes.astype(np.int64)


class PairCounts(Statistics):
    """Class weights and the weighted sum of each feature in each class, for the pairs seen.

    class_count : (n_classes,) total weight of each class
    keys : (n_pairs,) int64, sorted and distinct: ``feature << 32 | class`` of each pair seen
    counts : (n_pairs,) float64, the pair's weighted sum, in the order of ``keys``

    As arrays (``arrays``): class_count, and pair_feature, pair_class (int32) and pair_count of
    the pairs, sorted by feature then class.
    """

    names = ("class_count", "pair_feature", "pair_class", "pair_count")

    def __init__(self, class_count: FloatArray, keys: IntArray, counts: FloatArray):
        self.class_count = class_count
        self._keys, self._counts = keys, counts
        self._pending: list[tuple[IntArray, FloatArray]] = []  # (keys, values) of rows not folded in yet
        self._pending_size = 0
        self._index: PairIndex | None = None

    @classmethod
    def empty(cls, n_features: int) -> Self:
        if n_features > MAX_FEATURES:
            raise ValueError(f"sparse counts hold at most {MAX_FEATURES} features; got {n_features}")
        return cls(np.zeros(0), np.zeros(0, dtype=np.int64), np.zeros(0))

    # ---- learning -------------------------------------------------------------------------
    def update(self, X: Features, rows: IndexArray, weights: FloatArray | None) -> None:
        """Add a batch: X (n_samples, n_features) dense or CSR, the class row of each sample
        (n_samples,), the sample weights (n_samples,) or None."""
        self.class_count += class_totals(rows, weights, len(self.class_count))
        for first, cell_rows, columns, values in nonzero_cells(X):
            sample = cell_rows + first if first else cell_rows
            if weights is not None:
                values = values * weights[sample]
            keys = columns.astype(np.int64)
            keys <<= _CLASS_BITS
            keys |= rows[sample]
            self._append(keys, values)

    def _append(self, keys: IntArray, values: FloatArray) -> None:
        self._pending.append((keys, values))
        self._pending_size += len(keys)
        self._index = None
        if self._pending_size > max(_PENDING_FLOOR, len(self._keys)):
            self._fold()

    def _fold(self) -> None:
        """Fold the pending pairs in: one sort of the new keys, one merge into the kept ones."""
        if not self._pending:
            return
        keys = np.concatenate([keys for keys, _ in self._pending])
        values = np.concatenate([values for _, values in self._pending])
        self._pending, self._pending_size = [], 0
        distinct, sums = _summed_by_key(keys, values)
        at = np.searchsorted(self._keys, distinct)
        known = at < len(self._keys)
        known[known] = self._keys[at[known]] == distinct[known]
        if not self._counts.flags.writeable:  # taken over from a read-only buffer (a memory-mapped copy)
            self._counts = self._counts.copy()
        self._counts[at[known]] += sums[known]
        if not known.all():
            new = ~known
            self._keys = np.insert(self._keys, at[new], distinct[new])
            self._counts = np.insert(self._counts, at[new], sums[new])

    def grow(self, n_classes: int) -> None:
        """Add zero weights for new classes up to n_classes (their pairs come as they are seen)."""
        if len(self.class_count) < n_classes:
            self.class_count = np.pad(self.class_count, (0, n_classes - len(self.class_count)))

    def scale(self, factor: float) -> None:
        """Multiply every weight by ``factor`` (forgetting); a pair's count decays but stays."""
        self._fold()
        self.class_count = self.class_count * factor
        self._counts = self._counts * factor

    def merge(self, other: PairCounts, rows: IndexArray) -> None:
        """Add another's counts; rows, shape (n_other_classes,): where its classes sit here."""
        self.class_count[rows] += other.class_count
        keys, counts = other.pairs()
        classes = rows[keys & _CLASS_MASK].astype(np.int64)
        self._append((keys >> _CLASS_BITS) << _CLASS_BITS | classes, counts.copy())

    # ---- reading ----------------------------------------------------------------------------
    def pairs(self) -> tuple[IntArray, FloatArray]:
        """(keys, counts) of every pair, folded in: the arrays themselves, valid until the next change."""
        self._fold()
        return self._keys, self._counts

    def index(self) -> PairIndex:
        """The pairs arranged for scoring (computed once per change)."""
        if self._index is None:
            keys, _ = self.pairs()
            self._index = PairIndex(keys)
        return self._index

    def cells(self) -> tuple[IntArray, IntArray, FloatArray]:
        """(class, feature, count) of every pair, each (n_pairs,), sorted by feature then class."""
        keys, counts = self.pairs()
        return keys & _CLASS_MASK, keys >> _CLASS_BITS, counts

    def pairs_of(self, features: IndexArray) -> tuple[IndexArray, IndexArray, FloatArray]:
        """The pairs of the given features (distinct, increasing): each pair's feature as its place
        in ``features``, its class and its count, each (n_found,), in the order of the pairs."""
        keys, counts = self.pairs()
        if len(features) == 0:
            return np.zeros(0, np.intp), np.zeros(0, np.intp), np.zeros(0)
        span = slice(*np.searchsorted(keys, [int(features[0]) << _CLASS_BITS, int(features[-1] + 1) << _CLASS_BITS]))
        keys, counts = keys[span], counts[span]
        if len(keys) <= _LOOKUP_PAIRS_PER_FEATURE * len(features):
            # Look each pair's feature up in a table over the features' span: calloc'd, so only
            # the pages touched cost anything.
            lookup = np.zeros(int(features[-1] - features[0]) + 1, dtype=np.int32)
            lookup[features - features[0]] = np.arange(1, len(features) + 1, dtype=np.int32)
            places = lookup[(keys >> _CLASS_BITS) - features[0]].astype(np.intp) - 1
            found = places >= 0
            return places[found], (keys[found] & _CLASS_MASK).astype(np.intp), counts[found]
        firsts = features.astype(np.int64) << _CLASS_BITS  # far more pairs: search each feature's run
        begin = np.searchsorted(keys, firsts)
        end = np.searchsorted(keys, firsts + (1 << _CLASS_BITS))
        per_feature = end - begin
        places = np.repeat(np.arange(len(features)), per_feature)
        at = np.arange(len(places)) + np.repeat(begin - (np.cumsum(per_feature) - per_feature), per_feature)
        return places, (keys[at] & _CLASS_MASK).astype(np.intp), counts[at]

    def class_feature_totals(self) -> FloatArray:
        """Sum of the counts of each class over all features, shape (n_classes,)."""
        keys, counts = self.pairs()
        totals: FloatArray = np.bincount(keys & _CLASS_MASK, weights=counts,
                                         minlength=len(self.class_count)).astype(np.float64, copy=False)
        return totals

    def to_dense(self, n_features: int) -> FloatArray:
        """The counts as a (n_classes, n_features) table (as large as that is)."""
        classes, features, counts = self.cells()
        table = np.zeros((len(self.class_count), n_features))
        table[classes, features] = counts
        return table

    @classmethod
    def from_dense(cls, class_count: FloatArray, feature_count: FloatArray) -> Self:
        """Pair counts of a dense (n_classes, n_features) table: its nonzero cells."""
        classes, features = np.nonzero(feature_count.T)[::-1]
        counts = feature_count[classes, features].astype(np.float64)
        return cls(class_count.copy(), pair_keys(features, classes), counts)

    def n_pairs(self) -> int:
        return len(self.pairs()[0])

    # ---- as named arrays ----------------------------------------------------------------------
    def arrays(self) -> dict[str, AnyArray]:
        classes, features, counts = self.cells()
        return {"class_count": self.class_count, "pair_feature": features.astype(np.int32),
                "pair_class": classes.astype(np.int32), "pair_count": counts}

    @classmethod
    def _from_arrays(cls, arrays: Mapping[str, AnyArray]) -> Self:
        """ValueError unless the pairs are distinct, sorted by feature then class, of
        non-negative integer indices."""
        features, classes, counts = arrays["pair_feature"], arrays["pair_class"], arrays["pair_count"]
        for name, index in (("pair_feature", features), ("pair_class", classes)):
            if index.ndim != 1 or index.dtype.kind not in "iu":
                raise ValueError(f"{name} must be a list of integers; got dtype {index.dtype} and shape {index.shape}")
            if len(index) and not 0 <= int(index.min()) <= int(index.max()) < MAX_FEATURES:
                raise ValueError(f"{name} holds values outside 0..{MAX_FEATURES - 1}")
        if counts.shape != features.shape or classes.shape != features.shape:
            raise ValueError(f"pair_feature, pair_class and pair_count must have one value per pair; got shapes "
                             f"{features.shape}, {classes.shape} and {counts.shape}")
        keys = pair_keys(features, classes)
        if len(keys) > 1 and not (keys[1:] > keys[:-1]).all():
            raise ValueError("the pairs must be distinct and sorted by feature, then class")
        return cls(arrays["class_count"], keys, counts)

    def check(self, n_classes: int, n_features: int) -> None:
        """Raise ValueError unless these are counts of that shape a model could have learned."""
        if n_features > MAX_FEATURES:
            raise ValueError(f"sparse counts hold at most {MAX_FEATURES} features; the model claims {n_features}")
        class_count, (keys, counts) = self.class_count, self.pairs()
        for name, array, shape in (("class_count", class_count, (n_classes,)), ("pair_count", counts, keys.shape)):
            if array.shape != shape or array.dtype != np.float64:
                raise ValueError(f"{name} has shape {array.shape} and dtype {array.dtype}; expected {shape}, float64")
            if not np.isfinite(array).all() or (array < 0).any():
                raise ValueError(f"{name} holds negative, NaN or infinite values")
        if len(keys) and ((keys >> _CLASS_BITS)[-1] >= n_features or (keys & _CLASS_MASK).max() >= n_classes):
            raise ValueError(f"a pair names a feature or class beyond the model's {n_features} features and "
                             f"{n_classes} classes")


def _summed_by_key(keys: IntArray, values: FloatArray) -> tuple[IntArray, FloatArray]:
    """The distinct keys, increasing, and the sum of the values of each, both (n_distinct,).

    With numba, the keys' places among the distinct ones come from a hash table and the sums
    from a bincount, in the order of the keys. Without it, small whole-number values (word counts
    with unit weights, the common case) are summed by sorting each key repeated as often as its
    value and counting runs: a sort of the keys alone is several times faster than ordering the
    values with them."""
    if hashed(keys):
        distinct, places = distinct_and_places(keys)
        return distinct, np.bincount(places, weights=values, minlength=len(distinct)).astype(np.float64, copy=False)
    whole = len(values) and 1 <= values.min() and values.max() <= _LARGEST_REPEATED \
        and (values == np.rint(values)).all()
    if whole:
        ordered = np.sort(np.repeat(keys, values.astype(np.intp)))
    else:
        order = np.argsort(keys)
        ordered, values = keys[order], values[order]
    first = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]]) if len(ordered) else np.zeros(0, np.intp)
    sums = np.diff(np.r_[first, len(ordered)]).astype(np.float64) if whole else np.add.reduceat(values, first)
    return ordered[first], sums


class PairIndex:
    """The pairs arranged by feature, for products with rows.

    classes : (n_pairs,) the class of each pair; seen : (n_seen,) the distinct features that
    have pairs, increasing; starts : (n_seen + 1,) where each seen feature's pairs begin, and the
    end; features_of_pairs : (n_pairs,) each pair's feature as its place in ``seen``.

    A product first moves the columns of a row onto the seen features (a lookup of 4 bytes per
    feature, made at the first product), then multiplies with a (n_seen + 1, n_classes) matrix of
    the pairs' values, whose last row, for the features never seen, is 0: dense while the pairs
    fill a quarter of it, else sparse.
    """

    def __init__(self, keys: IntArray):
        features = keys >> _CLASS_BITS
        self.classes: IndexArray = (keys & _CLASS_MASK).astype(np.intp)
        first = np.flatnonzero(np.r_[True, features[1:] != features[:-1]]) if len(keys) else np.zeros(0, np.intp)
        self.seen: IntArray = features[first]
        self.starts: IndexArray = np.r_[first, len(keys)].astype(np.intp)
        self.features_of_pairs: IndexArray = np.repeat(np.arange(len(first)), np.diff(self.starts))
        self._lookup: npt.NDArray[np.int32] | None = None  # (n_features,): place in seen, or n_seen
        self._matrices: list[tuple[FloatArray, Any]] = []  # (pair values, the matrix made of them), newest last

    def pair_sums(self, X: Features, pair_values: FloatArray, n_classes: int) -> FloatArray:
        """sum over the pairs (c, f) seen of x_f * pair_values[pair], per row and class.

        X : (n_samples, n_features) dense or CSR; pair_values : (n_pairs,)
        Returns (n_samples, n_classes) float64.
        """
        matrix = self._pair_matrix(pair_values, n_classes)
        if is_sparse(X):
            product = self._on_seen(X) @ matrix
            return np.asarray(product.toarray() if is_sparse(product) else product, dtype=np.float64)
        sums = np.empty((X.shape[0], n_classes))
        seen_columns = self.seen.astype(np.intp)
        for block in row_blocks(X.shape[0], len(self.seen) + 1):
            on_seen = np.zeros((block.stop - block.start, len(self.seen) + 1))
            on_seen[:, :-1] = X[block][:, seen_columns]
            sums[block] = on_seen @ matrix
        return sums

    def feature_sums(self, X: Features, feature_values: FloatArray) -> FloatArray:
        """sum over the seen features f of x_f * feature_values[f's place in ``seen``], per row.

        feature_values : (n_seen,); returns (n_samples,) float64."""
        values = np.r_[feature_values, 0.0]
        if is_sparse(X):
            return np.asarray(self._on_seen(X) @ values, dtype=np.float64).reshape(-1)
        return np.asarray(X[:, self.seen.astype(np.intp)] @ feature_values, dtype=np.float64).reshape(-1)

    def values_at(self, pair_values: FloatArray, classes: IndexArray, features: IndexArray,
                  shape: tuple[int, int]) -> FloatArray:
        """pair_values (n_pairs,) at each (class, feature) given (n,): the pair's value where the pair
        was seen, 0 elsewhere; shape: (n_classes, n_features) of the counts."""
        n_classes, n_features = shape
        matrix = self._pair_matrix(pair_values, n_classes)
        places = self.places(n_features)[features]
        found = matrix[places, classes]
        return np.asarray(found.toarray() if is_sparse(found) else found, dtype=np.float64).reshape(-1)

    def feature_values_at(self, feature_values: FloatArray, features: IndexArray, n_features: int) -> FloatArray:
        """feature_values (n_seen,), one per seen feature, at each feature given (n,): 0 for the
        features never seen."""
        found: FloatArray = np.append(feature_values, 0.0)[self.places(n_features)[features]]
        return found

    def places(self, n_features: int) -> npt.NDArray[np.int32]:
        """Each feature's place in ``seen``, n_seen for the features never seen, shape (n_features,)
        (made once)."""
        if self._lookup is None or len(self._lookup) != n_features:
            self._lookup = np.full(n_features, len(self.seen), dtype=np.int32)
            self._lookup[self.seen] = np.arange(len(self.seen), dtype=np.int32)
        return self._lookup

    def _on_seen(self, X: Features) -> Features:
        """CSR X with its columns moved onto the seen features (n_samples, n_seen + 1), the
        features never seen all on the last column."""
        import scipy.sparse

        return scipy.sparse.csr_matrix((X.data, self.places(X.shape[1])[X.indices], X.indptr),
                                       shape=(X.shape[0], len(self.seen) + 1))

    def _pair_matrix(self, pair_values: FloatArray, n_classes: int) -> Any:
        """The (n_seen + 1, n_classes) matrix of the pairs' values (the last two kept while their
        values are the same: a model's scores, and an explanation's second table)."""
        for values, kept in self._matrices:
            if values is pair_values:
                return kept
        n_rows = len(self.seen) + 1
        if n_rows * n_classes <= 4 * len(pair_values) + (1 << 16) or not _has_scipy():
            matrix: Any = np.zeros((n_rows, n_classes))
            matrix[self.features_of_pairs, self.classes] = pair_values
        else:
            import scipy.sparse

            matrix = scipy.sparse.csr_matrix((pair_values, self.classes, np.r_[self.starts, self.starts[-1]]),
                                             shape=(n_rows, n_classes))
        self._matrices = [*self._matrices[-1:], (pair_values, matrix)]
        return matrix


def _has_scipy() -> bool:
    try:
        import scipy.sparse  # noqa: F401
    except ImportError:  # pragma: no cover - exercised only without scipy
        return False
    return True
