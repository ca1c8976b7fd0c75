"""Multinomial Naive Bayes: counts (word counts, pixel intensities)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from .discrete import Alpha, DiscreteTables, FeatureCountsNB
from .kernels import linear_scores
from .ndarrays import Features, FloatArray, IndexArray
from .validation import is_sparse


@dataclass
class MultinomialTables(DiscreteTables):
    """Kept so that a batch of text refreshes only the features it touched:
    log_smoothed : (n_features, n_classes) log(count + alpha), the layout the sparse product wants;
    log_total : (n_classes,) log of each class's smoothed total; bias : (n_classes,) the log prior.
    A row's score is x . log_smoothed - sum(x) log_total + bias."""

    log_smoothed: FloatArray
    log_total: FloatArray
    bias: FloatArray


class MultinomialNB(FeatureCountsNB[MultinomialTables]):
    """Naive Bayes for count features, streaming; scikit-learn's parameters and numbers.

    Parameters
    ----------
    alpha : float or array of shape (n_features,), default 1.0   additive smoothing
    force_alpha : bool, default True
    fit_prior : bool, default True
    class_prior : array of shape (n_classes,) or None
    half_life : float or None, default None   forgetting, in examples

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
                 class_prior: npt.ArrayLike | None = None, half_life: float | None = None):
        self.alpha = alpha
        self.force_alpha = force_alpha
        self.fit_prior = fit_prior
        self.class_prior = class_prior
        self.half_life = half_life

    _refreshes_features = True

    @property
    def feature_log_prob_(self) -> FloatArray:
        """log P(feature | class), shape (n_classes, n_features)."""
        tables = self._fresh_tables()
        log_prob: FloatArray = tables.log_smoothed.T - tables.log_total[:, None]
        return log_prob

    def _smooth(self, alpha: Alpha, class_log_prior: FloatArray) -> MultinomialTables:
        n_classes, n_features = self._stats.feature_count.shape
        log_smoothed = np.empty((n_features, n_classes))
        totals = np.empty(n_classes)
        for c, smoothed in self._smoothed_rows(alpha):
            np.log(smoothed, out=log_smoothed[:, c])
            totals[c] = smoothed.sum()
        return MultinomialTables(class_log_prior_=class_log_prior, log_smoothed=log_smoothed,
                                 log_total=np.log(totals), bias=class_log_prior)

    def _refresh_features(self, tables: MultinomialTables, features: IndexArray) -> None:
        alpha = self._checked_alpha()
        counts = self._stats.feature_count[:, features].T
        counts += alpha if np.ndim(alpha) == 0 else np.asarray(alpha)[features, None]
        tables.log_smoothed[features] = np.log(counts)
        tables.log_total = self._log_totals(alpha)
        tables.class_log_prior_ = tables.bias = self._class_log_prior()

    def _log_totals(self, alpha: Alpha) -> FloatArray:
        """log of each class's smoothed total, shape (n_classes,), summed as ``_smooth`` sums it."""
        return np.log([smoothed.sum() for _, smoothed in self._smoothed_rows(alpha)])

    def _smoothed_rows(self, alpha: Alpha) -> Iterator[tuple[int, FloatArray]]:
        """(class, counts + alpha of shape (n_features,)) for each class, in one reused row of
        scratch: a refresh needs no copy of the counts."""
        counts = self._stats.feature_count
        smoothed = np.empty(counts.shape[1])
        for c, row in enumerate(counts):
            np.add(row, alpha, out=smoothed)
            yield c, smoothed

    def _joint_log_likelihood(self, X: Features) -> FloatArray:
        tables = self._fresh_tables()
        if not is_sparse(X):  # dense rows are long to sum: fold the totals into the weights instead
            return linear_scores(X, tables.log_smoothed - tables.log_total, tables.bias)
        scores = linear_scores(X, tables.log_smoothed, tables.bias)
        scores -= np.asarray(X.sum(axis=1, dtype=np.float64)).reshape(-1, 1) * tables.log_total  # matrix or array
        return scores
