"""Sufficient statistics: what a model learns, and all it learns. No I/O.

Every statistic keeps one row per class (axis 0), adds up over examples, merges with
another of its kind, grows when a new class appears, and scales for forgetting. As named
arrays (``arrays``, ``from_arrays``) they are the learned state a snapshot stores; ``from_arrays``
and ``check`` refuse arrays that no training gives.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, ClassVar, Self

import numpy as np

from ..utils.blocked import add_class_sums, class_totals
from ..utils.ndarrays import AnyArray, Features, FloatArray, IndexArray, IntArray
from .moments import Moments, batch_moments, pool, pooled_variance

# The (class, category) cells CategoryCounts holds at most, over all its features: 2 GiB of float64.
# A table past it (min_categories in the millions, a category code of 10**9, tens of thousands of
# classes) is refused before it is allocated.
MOST_CATEGORY_CELLS = 1 << 28


class TableSizeError(ValueError):
    """Statistics that would grow past what a model holds at most (CategoricalNB's
    ``MOST_CATEGORY_CELLS``), refused before they are allocated: the model is left as it was."""


def _pad_rows(array: FloatArray, n_rows: int) -> FloatArray:
    """The array with zero rows added up to n_rows (itself when it has them: no copy per batch)."""
    if array.shape[0] >= n_rows:
        return array
    padded = np.zeros((n_rows, *array.shape[1:]), dtype=array.dtype)  # np.pad is slow Python for this
    padded[: array.shape[0]] = array
    return padded


class Statistics(ABC):
    """What the three kinds of statistics share; ``class_count`` has shape (n_classes,)."""

    names: ClassVar[tuple[str, ...]]  # the arrays ``arrays`` gives, in the order it gives them
    class_count: FloatArray

    @classmethod
    @abstractmethod
    def empty(cls, n_features: int) -> Self:
        """Statistics of no class yet."""

    @abstractmethod
    def update(self, X: Features, rows: IndexArray, weights: FloatArray | None) -> None:
        """Add a batch: X of shape (n_samples, n_features), the class row of each sample
        (n_samples,), and the sample weights (n_samples,) or None for unit weights."""

    @abstractmethod
    def grow(self, n_classes: int) -> None:
        """Add zero rows for new classes up to n_classes."""

    @abstractmethod
    def scale(self, factor: float) -> None:
        """Multiply every weight by ``factor`` (forgetting)."""

    @abstractmethod
    def merge(self, other: Self, rows: IndexArray) -> None:
        """Add another's statistics; rows, shape (n_other_classes,): where its classes sit here."""

    @abstractmethod
    def arrays(self) -> dict[str, AnyArray]:
        """The statistics as named arrays, in the order of ``names`` (the arrays themselves)."""

    @classmethod
    def from_arrays(cls, arrays: Mapping[str, AnyArray]) -> Self:
        """Statistics made of what ``arrays`` gave (taken over, not copied).

        Raises ValueError when an array is missing or unknown or the arrays do not fit
        together; ``check`` then says whether they fit a model's classes and features."""
        if set(arrays) != set(cls.names):
            raise ValueError(f"the statistics are {sorted(cls.names)}; got {sorted(arrays)}")
        return cls._from_arrays(arrays)

    @classmethod
    @abstractmethod
    def _from_arrays(cls, arrays: Mapping[str, AnyArray]) -> Self:
        """``from_arrays`` once the names are known to be right."""

    @abstractmethod
    def check(self, n_classes: int, n_features: int) -> None:
        """Raise ValueError unless these are statistics of that shape a model could have learned."""


class DiscreteCounts(Statistics):
    """Class weights and per-class feature sums, for Bernoulli, multinomial and complement.

    class_count : (n_classes,)            total weight of each class
    feature_count : (n_classes, n_features) weighted sum of each feature in each class
    """

    names = ("class_count", "feature_count")

    def __init__(self, class_count: FloatArray, feature_count: FloatArray):
        self.class_count = class_count
        self.feature_count = feature_count

    @classmethod
    def empty(cls, n_features: int) -> Self:
        return cls(np.zeros(0), np.zeros((0, n_features)))

    def update(self, X: Features, rows: IndexArray, weights: FloatArray | None) -> None:
        self.class_count += class_totals(rows, weights, len(self.class_count))
        add_class_sums(self.feature_count, X, rows, weights)

    def grow(self, n_classes: int) -> None:
        self.class_count = _pad_rows(self.class_count, n_classes)
        self.feature_count = _pad_rows(self.feature_count, n_classes)

    def scale(self, factor: float) -> None:
        self.class_count *= factor
        self.feature_count *= factor

    def merge(self, other: DiscreteCounts, rows: IndexArray) -> None:
        self.class_count[rows] += other.class_count
        self.feature_count[rows] += other.feature_count

    def arrays(self) -> dict[str, AnyArray]:
        return {"class_count": self.class_count, "feature_count": self.feature_count}

    @classmethod
    def _from_arrays(cls, arrays: Mapping[str, AnyArray]) -> Self:
        return cls(arrays["class_count"], arrays["feature_count"])

    def check(self, n_classes: int, n_features: int) -> None:
        _check_weights(self.class_count, n_classes)
        _check_table("feature_count", self.feature_count, (n_classes, n_features), non_negative=True)


class GaussianMoments(Statistics):
    """Per class and feature: weight, mean and M2 (sum of squared deviations from the mean).

    class_count : (n_classes,)   mean, m2 : (n_classes, n_features)

    Chunks combine with the pairwise update of Chan, Golub and LeVeque (``pool``), so any
    chunking of the same rows gives the same moments up to rounding.
    """

    names = ("class_count", "mean", "m2")

    def __init__(self, class_count: FloatArray, mean: FloatArray, m2: FloatArray):
        self.class_count = class_count
        self.mean = mean
        self.m2 = m2

    @classmethod
    def empty(cls, n_features: int) -> Self:
        return cls(np.zeros(0), np.zeros((0, n_features)), np.zeros((0, n_features)))

    @property
    def moments(self) -> Moments:
        """The statistics themselves (not copies) as ``Moments``."""
        return Moments(self.class_count, self.mean, self.m2)

    def update(self, X: Features, rows: IndexArray, weights: FloatArray | None) -> None:
        n_classes = len(self.class_count)
        self._combine(batch_moments(X, rows, weights, n_classes), np.arange(n_classes))

    def _combine(self, moments: Moments, rows: IndexArray) -> None:
        """Pool moments of k classes into the given class rows, shape (k,)."""
        mine = Moments(self.class_count[rows], self.mean[rows], self.m2[rows])
        self.class_count[rows], self.mean[rows], self.m2[rows] = pool(mine, moments)

    def grow(self, n_classes: int) -> None:
        self.class_count = _pad_rows(self.class_count, n_classes)
        self.mean = _pad_rows(self.mean, n_classes)
        self.m2 = _pad_rows(self.m2, n_classes)

    def scale(self, factor: float) -> None:
        self.class_count *= factor
        self.m2 *= factor

    def merge(self, other: GaussianMoments, rows: IndexArray) -> None:
        self._combine(other.moments, rows)

    def pooled_variance(self) -> FloatArray:
        """Variance of each feature over all classes together, shape (n_features,)."""
        return pooled_variance(self.moments)

    def arrays(self) -> dict[str, AnyArray]:
        return {"class_count": self.class_count, "mean": self.mean, "m2": self.m2}

    @classmethod
    def _from_arrays(cls, arrays: Mapping[str, AnyArray]) -> Self:
        return cls(arrays["class_count"], arrays["mean"], arrays["m2"])

    def check(self, n_classes: int, n_features: int) -> None:
        _check_weights(self.class_count, n_classes)
        _check_table("mean", self.mean, (n_classes, n_features), non_negative=False)
        _check_table("m2", self.m2, (n_classes, n_features), non_negative=True)


class CategoryCounts(Statistics):
    """Class weights and, per feature, the weight of each (class, category) pair.

    class_count : (n_classes,)
    category_count : list of n_features arrays, each (n_classes, n_categories_of_feature)

    As arrays, the tables are packed side by side: ``category_count`` of shape
    (n_classes, sum of the widths) and ``category_widths`` of shape (n_features,).
    """

    names = ("class_count", "category_widths", "category_count")

    def __init__(self, class_count: FloatArray, category_count: list[FloatArray]):
        self.class_count = class_count
        self.category_count = category_count

    @classmethod
    def empty(cls, n_features: int) -> Self:
        return cls(np.zeros(0), [np.zeros((0, 0)) for _ in range(n_features)])

    def widen(self, widths: Iterable[int | np.integer[Any]]) -> None:
        """Make room for categories 0..widths[i]-1 of each feature i (one width per feature); a
        table wide enough is kept as it is. ValueError, before allocating, past ``MOST_CATEGORY_CELLS``."""
        wanted = [max(table.shape[1], int(width)) for table, width in zip(self.category_count, widths, strict=True)]
        check_category_cells(len(self.class_count), wanted)
        self.category_count = [
            table if table.shape[1] >= width else _pad_columns(table, width)
            for table, width in zip(self.category_count, wanted, strict=True)
        ]

    def update(self, X: Features, rows: IndexArray, weights: FloatArray | None) -> None:
        """X holds non-negative integer category codes, shape (n_samples, n_features)."""
        n_classes = len(self.class_count)
        self.class_count += class_totals(rows, weights, n_classes)
        if X.shape[0]:
            self.widen(X.max(axis=0).astype(np.int64) + 1)
        # Feature by feature over a transposed copy of the (small, integer) codes, so each
        # bincount reads a contiguous column and fills a table that fits in cache.
        codes_by_feature = np.ascontiguousarray(X.T)
        for table, codes in zip(self.category_count, codes_by_feature, strict=True):
            width = table.shape[1]
            table += np.bincount(rows * width + codes, weights=weights,
                                 minlength=n_classes * width).reshape(n_classes, width)

    def recode(self, new_codes: Sequence[IntArray]) -> None:
        """Move the counts of code j of feature i to code new_codes[i][j].

        new_codes : one array per feature of distinct non-negative codes; every code with
            counts must have a new one.
        """
        if len(new_codes) != len(self.category_count):
            raise ValueError(f"cannot recode: {len(new_codes)} arrays of new codes for "
                             f"{len(self.category_count)} features; one per feature is needed.")
        recoded = []
        widths = [table.shape[1] for table in self.category_count]
        for feature, (table, codes) in enumerate(zip(self.category_count, new_codes, strict=True)):
            codes = np.asarray(codes)
            if codes.ndim != 1 or codes.dtype.kind not in "iu" or (codes < 0).any() \
                    or len(np.unique(codes)) != len(codes):
                raise ValueError(f"cannot recode: the new codes of feature {feature} must be distinct "
                                 f"non-negative integers; got {codes.tolist()[:10]}.")
            if table[:, len(codes):].any():
                raise ValueError(f"cannot recode: counts for codes >= {len(codes)} have no new code.")
            known = min(len(codes), table.shape[1])
            widths[feature] = max(table.shape[1], int(codes.max(initial=-1)) + 1)
            check_category_cells(table.shape[0], widths)
            moved = np.zeros((table.shape[0], max(table.shape[1], int(codes.max(initial=-1)) + 1)))
            moved[:, codes[:known]] = table[:, :known]
            recoded.append(moved)
        self.category_count = recoded

    def grow(self, n_classes: int) -> None:
        check_category_cells(n_classes, [table.shape[1] for table in self.category_count])
        self.class_count = _pad_rows(self.class_count, n_classes)
        self.category_count = [_pad_rows(table, n_classes) for table in self.category_count]

    def scale(self, factor: float) -> None:
        self.class_count *= factor
        for table in self.category_count:
            table *= factor

    def merge(self, other: CategoryCounts, rows: IndexArray) -> None:
        self.widen([table.shape[1] for table in other.category_count])
        self.class_count[rows] += other.class_count
        for mine, theirs in zip(self.category_count, other.category_count, strict=True):
            mine[rows, : theirs.shape[1]] += theirs

    def arrays(self) -> dict[str, AnyArray]:
        widths = np.array([table.shape[1] for table in self.category_count], dtype=np.int64)
        packed = np.concatenate(self.category_count, axis=1) if self.category_count else np.zeros((0, 0))
        return {"class_count": self.class_count, "category_widths": widths, "category_count": packed}

    @classmethod
    def _from_arrays(cls, arrays: Mapping[str, AnyArray]) -> Self:
        """Unpack the tables, after checking that the widths split the packed columns exactly
        (Python integers: no overflow, whatever the widths claim)."""
        widths, packed = arrays["category_widths"], arrays["category_count"]
        if widths.ndim != 1 or widths.dtype.kind not in "iu":
            raise ValueError(f"category_widths must be a list of integers; got dtype {widths.dtype} "
                             f"and shape {widths.shape}")
        if packed.ndim != 2:
            raise ValueError(f"category_count has shape {packed.shape}; expected 2 axes")
        listed = widths.tolist()
        if any(width < 1 for width in listed) or sum(listed) != packed.shape[1]:
            raise ValueError(f"category_widths {listed[:10]} (first ten) must be positive and add up to the "
                             f"{packed.shape[1]} columns of category_count")
        tables = np.split(packed, np.cumsum(widths)[:-1], axis=1) if len(listed) else []
        return cls(arrays["class_count"], [np.ascontiguousarray(table) for table in tables])

    def check(self, n_classes: int, n_features: int) -> None:
        _check_weights(self.class_count, n_classes)
        if len(self.category_count) != n_features:
            raise ValueError(f"{len(self.category_count)} category tables for {n_features} features")
        for table in self.category_count:
            _check_table("category_count", table, (n_classes, table.shape[1]), non_negative=True)


def check_category_cells(n_classes: int, widths: Sequence[int], *, cause: str = "") -> None:
    """Refuse (TableSizeError) category tables of more than ``MOST_CATEGORY_CELLS`` (class, category)
    cells: n_classes rows, widths (n_features,) the categories of each feature (Python integers:
    no overflow). cause : what asks for them, said first (default: what can make them so large)."""
    cells = n_classes * sum(widths)
    if cells <= MOST_CATEGORY_CELLS:
        return
    widest = max(range(len(widths)), key=widths.__getitem__)
    why = cause or ("lower min_categories, number each feature's categories from 0 without gaps, or learn "
                    "fewer classes")
    raise TableSizeError(f"CategoricalNB's tables would hold {cells:,} (class, category) cells: {n_classes:,} "
                         f"classes x {sum(widths):,} categories of {len(widths):,} features (feature {widest} has "
                         f"{widths[widest]:,}); at most {MOST_CATEGORY_CELLS:,} (2 GiB of float64): {why}.")


def _pad_columns(table: FloatArray, n_columns: int) -> FloatArray:
    """The table (n_rows, k) with zero columns added up to n_columns > k."""
    padded = np.zeros((table.shape[0], n_columns))
    padded[:, : table.shape[1]] = table
    return padded


def _check_weights(class_count: FloatArray, n_classes: int) -> None:
    _check_table("class_count", class_count, (n_classes,), non_negative=True)


_CHECK_BLOCK = 1 << 20  # values checked at a time


def _check_table(name: str, array: AnyArray, shape: tuple[int, ...], non_negative: bool) -> None:
    if array.shape != shape:
        raise ValueError(f"{name} has shape {array.shape}; expected {shape}")
    if array.dtype != np.float64:
        raise ValueError(f"{name} has dtype {array.dtype}; expected float64")
    # A block at a time: a check holds no mask of the whole table (an eighth of its size).
    flat = array.reshape(-1)
    blocks = [flat[start:start + _CHECK_BLOCK] for start in range(0, flat.size, _CHECK_BLOCK)]
    if not all(np.isfinite(block).all() for block in blocks):
        raise ValueError(f"{name} holds NaN or infinite values")
    if non_negative and any((block < 0).any() for block in blocks):
        raise ValueError(f"{name} holds negative values")
