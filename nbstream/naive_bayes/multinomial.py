"""Multinomial Naive Bayes: counts (word counts, pixel intensities)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial

import numpy as np
import numpy.typing as npt

from ..prequential.count_cells import compiled_log_count_sums
from ..prequential.counts import (
    BatchCells,
    CountsAt,
    LearnedRows,
    class_weights_before,
    dense_counts,
    feature_totals_before,
    padded,
)
from ..prequential.dense_weights import version_scores
from ..stats.counts import DiscreteCounts
from ..stats.sparse_counts import PairCounts
from ..utils.blocked import linear_scores
from ..utils.ndarrays import Features, FloatArray, IndexArray
from ..utils.validation import is_sparse
from .discrete import Alpha, DiscreteTables, FeatureCountsNB, row_sums


@dataclass
class MultinomialTables(DiscreteTables):
    """Kept so that a batch of text refreshes only the features it touched:
    log_smoothed : (n_features, n_classes) log(count + alpha), the layout the sparse product wants;
    log_total : (n_classes,) log of each class's smoothed total; bias : (n_classes,) the log prior.
    A row's score is x . log_smoothed - sum(x) log_total + bias."""

    log_smoothed: FloatArray
    log_total: FloatArray
    bias: FloatArray


@dataclass
class MultinomialPairTables(DiscreteTables):
    """The tables of sparse counts. A pair never seen has log(alpha) - log_total, so a row's score
    is its product with pair_weight over the pairs it has + sum(x) unseen + bias:
    pair_weight : (n_pairs,) log(count + alpha) - log(alpha) of each pair seen, in their order;
    unseen : (n_classes,) log(alpha) minus the log of each class's smoothed total;
    bias : (n_classes,) the log prior."""

    pair_weight: FloatArray
    unseen: FloatArray
    bias: FloatArray


class MultinomialNB(FeatureCountsNB[MultinomialTables | MultinomialPairTables]):
    """Naive Bayes for count features, streaming; scikit-learn's parameters and numbers.

    Parameters
    ----------
    alpha : float or array of shape (n_features,), default 1.0   additive smoothing
    force_alpha : bool, default True
    fit_prior : bool, default True
    class_prior : array of shape (n_classes,) or None
    half_life : float or None, default None   forgetting, in examples
    window, window_buckets, counts : as BernoulliNB's (the last window of examples; the counts held
        dense or as the (class, feature) pairs seen)

    Fitted attributes as BernoulliNB. Features must be non-negative.

    >>> model = MultinomialNB().partial_fit([[3, 0], [1, 1], [0, 4]], [0, 0, 1])
    >>> model.feature_count_.tolist()
    [[4.0, 1.0], [0.0, 4.0]]
    >>> np.exp(model.feature_log_prob_).round(3).tolist()  # (count + 1) / (total + 2)
    [[0.714, 0.286], [0.167, 0.833]]
    """

    kind = "multinomial"
    requires_non_negative = True

    def __init__(self, *, alpha: float | npt.ArrayLike = 1.0, force_alpha: bool = True, fit_prior: bool = True,
                 class_prior: npt.ArrayLike | None = None, half_life: float | None = None,
                 window: int | None = None, window_buckets: int = 10, counts: str = "auto"):
        self.alpha = alpha
        self.force_alpha = force_alpha
        self.fit_prior = fit_prior
        self.class_prior = class_prior
        self.half_life = half_life
        self.window = window
        self.window_buckets = window_buckets
        self.counts = counts

    def _refreshes_by_feature(self) -> bool:
        return isinstance(self._stats, DiscreteCounts)

    @property
    def feature_log_prob_(self) -> FloatArray:
        """log P(feature | class), shape (n_classes, n_features) (computed now for sparse counts)."""
        tables: MultinomialTables = self._dense_tables()
        log_prob: FloatArray = tables.log_smoothed.T - tables.log_total[:, None]
        return log_prob

    def _smooth_dense(self, counts: DiscreteCounts, alpha: Alpha, class_log_prior: FloatArray) -> MultinomialTables:
        n_classes, n_features = counts.feature_count.shape
        log_smoothed = np.empty((n_features, n_classes))
        totals = np.empty(n_classes)
        for c, smoothed in self._smoothed_rows(counts, alpha):
            np.log(smoothed, out=log_smoothed[:, c])
            totals[c] = smoothed.sum()
        return MultinomialTables(class_log_prior_=class_log_prior, log_smoothed=log_smoothed,
                                 log_total=np.log(totals), bias=class_log_prior)

    def _smooth_pairs(self, counts: PairCounts, alpha: float, class_log_prior: FloatArray) -> MultinomialPairTables:
        _, pair_counts = counts.pairs()
        log_alpha = np.log(alpha)
        totals = counts.class_feature_totals() + alpha * self.n_features_in_
        return MultinomialPairTables(class_log_prior_=class_log_prior, bias=class_log_prior,
                                     pair_weight=np.log(pair_counts + alpha) - log_alpha,
                                     unseen=log_alpha - np.log(totals))

    def _refresh_features(self, tables: MultinomialTables | MultinomialPairTables, features: IndexArray) -> None:
        assert isinstance(tables, MultinomialTables) and isinstance(self._stats, DiscreteCounts)
        alpha = self._checked_alpha()
        counts = self._stats.feature_count[:, features].T
        counts += alpha if np.ndim(alpha) == 0 else np.asarray(alpha)[features, None]
        tables.log_smoothed[features] = np.log(counts)
        tables.log_total = np.log([smoothed.sum() for _, smoothed in self._smoothed_rows(self._stats, alpha)])
        tables.class_log_prior_ = tables.bias = self._class_log_prior()

    @staticmethod
    def _smoothed_rows(counts: DiscreteCounts, alpha: Alpha) -> Iterator[tuple[int, FloatArray]]:
        """(class, counts + alpha of shape (n_features,)) for each class, in one reused row of
        scratch: a refresh needs no copy of the counts."""
        smoothed = np.empty(counts.feature_count.shape[1])
        for c, row in enumerate(counts.feature_count):
            np.add(row, alpha, out=smoothed)
            yield c, smoothed

    def _joint_log_likelihood(self, X: Features) -> FloatArray:
        tables = self._fresh_tables()
        if isinstance(tables, MultinomialPairTables):
            return self._pair_scores(X, tables.pair_weight, tables.unseen, tables.bias)
        if not is_sparse(X):  # dense rows are long to sum: fold the totals into the weights instead
            return linear_scores(X, tables.log_smoothed - tables.log_total, tables.bias)
        scores = linear_scores(X, tables.log_smoothed, tables.bias)
        scores -= row_sums(X)[:, None] * tables.log_total
        return scores

    def _feature_weights(self, classes: IndexArray, features: IndexArray) -> FloatArray:
        """log theta of each (class, feature) cell, shape (n_cells,)."""
        tables = self._fresh_tables()
        if isinstance(tables, MultinomialPairTables):
            return tables.unseen[classes] + self._at_pairs(tables.pair_weight, classes, features)
        weights: FloatArray = tables.log_smoothed[features, classes] - tables.log_total[classes]
        return weights

    def _prequential_joint_log_likelihood(self, X: Features, statistics: DiscreteCounts | PairCounts,
                                          rows: IndexArray, weights: FloatArray | None, n_classes: int) -> FloatArray:
        """sum_f x_f log(N_cf + alpha_f) - sum(x) log(N_c + sum(alpha)) + log prior, with N the counts
        after the rows before. Sparse rows are scored at their own cells only, each the statistics'
        count plus what the earlier rows of the class added to that feature; dense rows against a
        weight vector per learned row (``version_scores``), which a product scores at once."""
        learned = LearnedRows(rows, weights, n_classes)
        alpha = self._smoothing_alpha()
        if is_sparse(X):
            jll = self._prequential_cells(X, statistics, learned, alpha)
        else:
            jll = version_scores(X, learned, dense_counts(statistics, n_classes, X.shape[1]),
                                 padded(statistics.class_count, n_classes), partial(_weigh, alpha=alpha))
        jll += self._class_log_priors(class_weights_before(statistics, learned),
                                      learned.classes_known(len(statistics.class_count)))
        return jll

    def _prequential_cells(self, X: Features, statistics: DiscreteCounts | PairCounts, learned: LearnedRows,
                           alpha: Alpha) -> FloatArray:
        """The scores of CSR rows but their priors, shape (n_samples, n_classes): by compiled loops
        where they are installed (``count_cells``), else in numpy over the batch's cells ordered
        by feature."""
        jll = compiled_log_count_sums(X, statistics, learned, alpha)
        if jll is None:
            jll = self._log_count_sums_by_feature(X, statistics, learned, alpha)
        sizes = row_sums(X)
        totals = feature_totals_before(statistics, learned, sizes)
        totals += np.sum(alpha) if np.ndim(alpha) else alpha * X.shape[1]
        jll -= sizes[:, None] * np.log(totals)
        return jll

    @staticmethod
    def _log_count_sums_by_feature(X: Features, statistics: DiscreteCounts | PairCounts, learned: LearnedRows,
                                   alpha: Alpha) -> FloatArray:
        """sum_f x_if log(count_cf + alpha_f) of each row i and class c under the counts the rows
        before it left, shape (n_samples, n_classes), in numpy (``BatchCells``)."""
        cells = BatchCells(X, learned)
        cell_alpha = alpha if np.ndim(alpha) == 0 else np.asarray(alpha)[cells.features]
        held = CountsAt(statistics, cells.distinct)
        jll = np.empty((len(learned), learned.n_classes))
        for chunk in cells.class_chunks(learned.n_classes):
            counts = cells.counts_before(chunk, held.of_classes(chunk))
            counts += cell_alpha
            np.log(counts, out=counts)
            counts *= cells.values
            jll[:, chunk] = cells.row_sums(counts)
        return jll


def _weigh(counts: FloatArray, class_weights: FloatArray, scratch: FloatArray, alpha: Alpha) -> FloatArray:
    """Versions' weights log(N_f + alpha_f) - log(sum_f N_f + alpha_f), in place in their counts
    (n_versions, n_features), and biases 0: ``Weigh``."""
    log_totals = np.log(counts.sum(axis=1) + (np.sum(alpha) if np.ndim(alpha) else alpha * counts.shape[1]))
    counts += alpha
    np.log(counts, out=counts)
    counts -= log_totals[:, None]
    return np.zeros(len(counts))
