"""Categorical Naive Bayes: each feature takes one of a few categories, coded 0, 1, 2, ..."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Self

import numpy as np
import numpy.typing as npt

from ..prequential.counts import LearnedRows
from ..prequential.moments_and_categories import counts_before_each_row
from ..stats.counts import CategoryCounts, check_category_cells
from ..utils.class_set import ClassSet
from ..utils.ndarrays import AnyArray, Features, FloatArray, IndexArray, IntArray
from ..utils.parameters import Interval, ParameterRule, ParameterRules
from .discrete import Alpha, DiscreteNB, DiscreteTables
from .explanations import PairContributions

# min_categories at most, for any feature: a feature of more categories than this is an identifier.
# The tables of all features together are bounded too: n_classes x the sum of the features'
# categories at most MOST_CATEGORY_CELLS (2**28 cells, 2 GiB of float64), refused before allocating.
MOST_CATEGORIES = 1 << 24


@dataclass
class CategoricalTables(DiscreteTables):
    """Per feature i: feature_log_prob_[i] (n_classes, n_categories_i) log P(code | c), and
    log_prob_by_code[i] (n_categories_i + 1, n_classes), the same by code plus a zero row that
    unseen codes point to; n_categories_ : (n_features,); bias : (n_classes,) the log prior."""

    feature_log_prob_: list[FloatArray]
    log_prob_by_code: list[FloatArray]
    n_categories_: IntArray
    bias: FloatArray

    @functools.cached_property
    def stacked_by_code(self) -> tuple[FloatArray, IntArray]:
        """``feature_log_prob_`` of every feature side by side, each followed by a zero column for the
        codes never seen (n_classes, sum of (n_categories_i + 1)), and the column where each
        feature's begin (n_features,)."""
        zeros = np.zeros((len(self.bias), 1))
        widths = self.n_categories_ + 1
        return (np.concatenate([part for table in self.feature_log_prob_ for part in (table, zeros)], axis=1),
                np.cumsum(widths) - widths)


class CategoricalNB(DiscreteNB[CategoryCounts, CategoricalTables]):
    """Naive Bayes for categorical features, streaming; scikit-learn's parameters and numbers.

    Parameters
    ----------
    alpha : float, default 1.0   additive smoothing
    force_alpha : bool, default True
    fit_prior : bool, default True
    class_prior : array of shape (n_classes,) or None
    min_categories : int, array of shape (n_features,) or None
        Minimum number of categories per feature (codes 0..min_categories-1), at most
        ``MOST_CATEGORIES`` (2**24) each. The tables hold n_classes x (sum of the features'
        categories) float64 cells, ``MOST_CATEGORY_CELLS`` (2**28, 2 GiB) at most: a model that
        would need more (by min_categories, a category code in the data, or its classes) is
        refused with a ValueError before anything is allocated.
    half_life : float or None, default None
    window : int or None, default None   learn only the most recent examples: the model is exactly
        that of the last window - ceil(window / window_buckets) + 1 to window examples, kept in
        window_buckets buckets (memory: window_buckets + 1 times the statistics). Not with half_life.
    window_buckets : int, default 10   how many buckets the window is kept in (1 to window)

    Fitted attributes: classes_, class_count_, category_count_ (list of n_features arrays
    of shape (n_classes, n_categories_i)), feature_log_prob_ (same shapes),
    n_categories_ (n_features,), class_log_prior_, n_features_in_.

    X holds non-negative integer codes. A code never seen in training is not an error at
    prediction: that feature is left out of that row's score (it says nothing about any
    class), where scikit-learn raises an IndexError.

    >>> model = CategoricalNB().partial_fit([[0, 1], [0, 2], [1, 2]], ["a", "a", "b"])
    >>> model.category_count_[1].tolist()
    [[0.0, 1.0, 1.0], [0.0, 0.0, 1.0]]
    >>> model.predict([[0, 7]]).tolist()  # code 7 of feature 1 is unseen: feature 0 decides
    ['a']
    """

    kind = "categorical"
    _accept_sparse = False
    _parameter_rules = ParameterRules((
        ParameterRule("alpha", "float", "Additive smoothing.", bounds=Interval(0, None)),
        ParameterRule("min_categories", "int", "Least number of categories of each feature: codes 0 to "
                      "min_categories - 1 (None: those seen); at most 16777216. The tables hold n_classes x the "
                      "categories of every feature, in cells of 8 bytes: 2**28 at most.",
                      bounds=Interval(1, MOST_CATEGORIES),
                      optional=True, per_feature=True),
    ))
    _categorical_input = True
    _statistics_type = CategoryCounts
    min_categories: int | npt.ArrayLike | None

    def __init__(self, *, alpha: float = 1.0, force_alpha: bool = True, fit_prior: bool = True,
                 class_prior: npt.ArrayLike | None = None, min_categories: int | npt.ArrayLike | None = None,
                 half_life: float | None = None, window: int | None = None, window_buckets: int = 10):
        self.alpha = alpha
        self.force_alpha = force_alpha
        self.fit_prior = fit_prior
        self.class_prior = class_prior
        self.min_categories = min_categories
        self.half_life = half_life
        self.window = window
        self.window_buckets = window_buckets

    def _check_shapes(self, n_features: int, n_classes: int | None) -> None:
        super()._check_shapes(n_features, n_classes)
        if self.min_categories is not None:
            minimum = np.asarray(self.min_categories)
            if minimum.ndim > 1 or (minimum.ndim == 1 and minimum.shape != (n_features,)):
                raise ValueError(f"'min_categories' should have shape ({n_features},) (one per feature) or be one "
                                 f"integer; got {self.min_categories!r}.")
            if minimum.dtype.kind not in "iu" or (minimum < 1).any() or (minimum > MOST_CATEGORIES).any():
                raise ValueError(f"min_categories must be an integer from 1 to {MOST_CATEGORIES}, or one per "
                                 f"feature ({n_features}); got {self.min_categories!r}.")

    def _check_room(self, X: Features, class_set: ClassSet, labels: AnyArray, *, fresh: bool) -> None:
        """Refuse (ValueError) a batch after which the tables would hold more than
        ``MOST_CATEGORY_CELLS`` cells: the classes after it by each feature's categories (those
        held, min_categories, and the largest code of the batch), before anything is allocated."""
        n_classes = len(class_set)
        if not class_set.fixed:
            n_classes += len(np.unique(labels[~class_set.known(labels)]))
        n_classes = max(n_classes, 1)  # an open model's first class, whatever the batch
        widths = [0] * X.shape[1]
        if self.min_categories is not None:
            widths = np.broadcast_to(np.asarray(self.min_categories), (X.shape[1],)).tolist()
            check_category_cells(n_classes, widths, cause=f"lower min_categories ({self.min_categories!r}) or "
                                                          "learn fewer classes")
        if not fresh:
            for statistics in self._held.each():
                widths = [max(width, table.shape[1]) for width, table in zip(widths, statistics.category_count,
                                                                             strict=True)]
        if X.shape[0]:
            widths = [max(width, int(code) + 1) for width, code in zip(widths, X.max(axis=0).tolist(), strict=True)]
        check_category_cells(n_classes, widths)

    def _new_statistics(self, n_features: int) -> CategoryCounts:
        counts = CategoryCounts.empty(n_features)
        if self.min_categories is not None:
            counts.widen(np.broadcast_to(np.asarray(self.min_categories), (n_features,)))
        return counts

    @property
    def category_count_(self) -> list[FloatArray]:
        """Per feature, the weight of each (class, category) pair: n_features arrays of shape
        (n_classes, n_categories_i)."""
        self._require_fitted()
        return self._stats.category_count

    @property
    def feature_log_prob_(self) -> list[FloatArray]:
        """Per feature, log P(category | class): n_features arrays of shape (n_classes, n_categories_i)."""
        return self._fresh_tables().feature_log_prob_

    @property
    def n_categories_(self) -> IntArray:
        """Categories of each feature (codes 0..n-1 have a table entry), shape (n_features,)."""
        return self._fresh_tables().n_categories_

    def recode_categories(self, new_codes: Sequence[IntArray]) -> Self:
        """Move category j of feature i to code new_codes[i][j] (to merge models whose
        category codes were assigned in different orders). Returns self.

        new_codes : one array per feature of distinct non-negative codes."""
        self._require_fitted()
        self._change_statistics(lambda counts: counts.recode(new_codes))
        return self

    def _prepare(self, X: Features) -> Features:
        """Category codes as integers; floats are accepted only when integral."""
        if X.dtype.kind in "if" and X.size and X.min() < 0:
            raise ValueError(f"Negative values in data passed to CategoricalNB (input X): category codes start at 0; "
                             f"got {X.min()}.")
        if X.dtype.kind == "f":
            if (X != np.floor(X)).any():
                raise ValueError("CategoricalNB expects integer category codes; got fractional values.")
            X = X.astype(np.int64)
        if X.dtype.kind == "b":
            X = X.view(np.uint8)
        return X

    def _smooth(self, alpha: Alpha, class_log_prior: FloatArray) -> CategoricalTables:
        tables = [table + alpha for table in self._stats.category_count]
        log_prob = [np.log(t) - np.log(t.sum(axis=1, keepdims=True)) for t in tables]
        by_code = [np.vstack([t.T, np.zeros((1, len(class_log_prior)))]) for t in log_prob]
        return CategoricalTables(class_log_prior_=class_log_prior, feature_log_prob_=log_prob,
                                 log_prob_by_code=by_code,
                                 n_categories_=np.array([t.shape[1] for t in log_prob], dtype=np.int64),
                                 bias=class_log_prior)

    def _joint_log_likelihood(self, X: Features) -> FloatArray:
        tables = self._fresh_tables()
        scores = np.zeros((X.shape[0], len(tables.bias)))
        for table, codes in zip(tables.log_prob_by_code, np.ascontiguousarray(X.T), strict=True):
            unseen = np.int64(table.shape[0] - 1)
            scores += table.take(np.minimum(codes, unseen), axis=0)
        scores += tables.bias
        return scores

    def _pair_contributions(self, first: int, second: int) -> CategoricalContributions:
        return CategoricalContributions(self._fresh_tables(), first, second)

    def _prequential_joint_log_likelihood(self, X: Features, statistics: CategoryCounts, rows: IndexArray,
                                          weights: FloatArray | None, n_classes: int) -> FloatArray:
        """Each row's scores from its own counts: (n_samples, n_classes)."""
        alpha = float(self._smoothing_alpha())
        n_known = LearnedRows(rows, weights, n_classes).classes_known(len(statistics.class_count))
        scores = np.empty((X.shape[0], n_classes))
        for block, counts in counts_before_each_row(statistics, X, rows, weights, n_classes):
            log_prob = np.log(counts.own_count + alpha)
            log_prob -= np.log(counts.feature_total + alpha * counts.n_categories[..., None])
            log_prob[X[block] >= counts.n_categories] = 0.0  # a category not seen says nothing about any class
            scores[block] = log_prob.sum(axis=1)
            scores[block] += self._class_log_priors(counts.class_count, n_known[block])
        return scores


class CategoricalContributions(PairContributions):
    """log P(x_f | c1) - log P(x_f | c2) of each feature at the row's category: 0 for a category
    the model never saw, whose log probability the scores take as 0 in every class."""

    def __init__(self, tables: CategoricalTables, first: int, second: int):
        stacked, starts = tables.stacked_by_code
        self.first, self.second = stacked[first], stacked[second]
        # each feature's code of the column of zeros, and where its columns begin: at most 2**28 columns
        self.unseen, self.starts = tables.n_categories_.astype(np.int32), starts.astype(np.int32)

    def dense(self, X: AnyArray, out: FloatArray) -> None:
        codes = np.minimum(X, self.unseen)
        codes += self.starts
        np.take(self.first, codes, out=out)
        out -= self.second.take(codes)
