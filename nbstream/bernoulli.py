"""Bernoulli Naive Bayes: binary features, presence and absence both count."""

from __future__ import annotations

import numbers
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from .discrete import Alpha, DiscreteTables, FeatureCountsNB, weights_for_rows
from .kernels import linear_scores
from .ndarrays import Features, FloatArray
from .pairs import PairCounts
from .stats import DiscreteCounts
from .validation import is_sparse


@dataclass
class BernoulliTables(DiscreteTables):
    """feature_log_prob_ : (n_classes, n_features) log P(x_f = 1 | c); a row's score is
    x . weights + bias, weights : (n_features, n_classes), bias : (n_classes,)."""

    feature_log_prob_: FloatArray
    weights: FloatArray
    bias: FloatArray


@dataclass
class BernoulliPairTables(DiscreteTables):
    """The tables of sparse counts. A pair never seen has the weight ``unseen`` of its class, so a
    row's score is its product with pair_weight over the pairs it has + sum(x) unseen + bias:
    pair_weight : (n_pairs,) log p - log(1 - p) of each pair seen, less its class's unseen weight;
    unseen : (n_classes,) log p - log(1 - p) of a pair never seen;
    bias : (n_classes,) the log prior + the sum of log(1 - p) over all features."""

    pair_weight: FloatArray
    unseen: FloatArray
    bias: FloatArray


class BernoulliNB(FeatureCountsNB[BernoulliTables | BernoulliPairTables]):
    """Naive Bayes for binary features, streaming; scikit-learn's parameters and numbers.

    Parameters
    ----------
    alpha : float or array of shape (n_features,), default 1.0   additive smoothing
    force_alpha : bool, default True     keep alpha below 1e-10 as given
    binarize : float or None, default 0.0   threshold: features > binarize become 1
    fit_prior : bool, default True       learn class priors (else uniform)
    class_prior : array of shape (n_classes,) or None   fixed priors
    half_life : float or None, default None   forget: an example's weight halves every
        half_life newer examples
    window : int or None, default None   learn only the most recent examples: the model is exactly
        that of the last window - ceil(window / window_buckets) + 1 to window examples, kept in
        window_buckets buckets (memory: window_buckets + 1 times the statistics). Not with half_life.
    window_buckets : int, default 10   how many buckets the window is kept in (1 to window)
    counts : "auto", "dense" or "sparse", default "auto"   how the counts are held: a dense
        (n_classes, n_features) table, or only the (class, feature) pairs seen; "auto" is sparse
        from 2**16 features on. Predictions are the same either way.

    Fitted attributes: classes_ (n_classes,), class_count_ (n_classes,),
    feature_count_ (n_classes, n_features): an ndarray, or a scipy.sparse.csr_array for sparse counts;
    feature_log_prob_ (n_classes, n_features) an ndarray (for sparse counts computed when read:
    n_classes x n_features x 8 bytes); sparse_counts_,
    class_log_prior_ (n_classes,), n_features_in_, n_examples_seen_ (all examples learned),
    n_examples_in_window_ (those the statistics hold).

    >>> model = BernoulliNB().partial_fit([[1, 0], [1, 1], [0, 1]], ["a", "a", "b"])
    >>> model.class_count_.tolist(), model.feature_count_.tolist()
    ([2.0, 1.0], [[2.0, 1.0], [0.0, 1.0]])
    >>> np.exp(model.feature_log_prob_).round(3).tolist()  # (count + 1) / (class count + 2)
    [[0.75, 0.5], [0.333, 0.667]]
    >>> model.predict([[1, 0]]).tolist()
    ['a']
    """

    kind = "bernoulli"

    binarize: float | None

    def __init__(self, *, alpha: float | npt.ArrayLike = 1.0, force_alpha: bool = True,
                 binarize: float | None = 0.0, fit_prior: bool = True, class_prior: npt.ArrayLike | None = None,
                 half_life: float | None = None, window: int | None = None, window_buckets: int = 10,
                 counts: str = "auto"):
        self.alpha = alpha
        self.force_alpha = force_alpha
        self.binarize = binarize
        self.fit_prior = fit_prior
        self.class_prior = class_prior
        self.half_life = half_life
        self.window = window
        self.window_buckets = window_buckets
        self.counts = counts

    def check_params(self) -> None:
        super().check_params()
        binarize = self.binarize
        if binarize is not None and (not isinstance(binarize, numbers.Real) or isinstance(binarize, bool)
                                     or not 0 <= float(binarize) < np.inf):
            raise ValueError(f"binarize must be a finite number >= 0 or None; got {self.binarize!r} "
                             "(a negative threshold would turn the implicit zeros of sparse input into ones).")

    @property
    def feature_log_prob_(self) -> FloatArray:
        """log P(feature = 1 | class), shape (n_classes, n_features) (computed now for sparse counts)."""
        tables: BernoulliTables = self._dense_tables()
        return tables.feature_log_prob_

    def _prepare(self, X: Features) -> Features:
        """Binarize: dense input becomes a bool array; CSR keeps its sparsity."""
        if self.binarize is None:
            return X
        if is_sparse(X):
            X = X.copy()
            X.data = (X.data > self.binarize).astype(np.float64)
            X.eliminate_zeros()
            return X
        if X.dtype.kind in "iu":  # x > 127.5 is x > 127 for integers: no float conversion
            threshold = np.floor(self.binarize)
            limits = np.iinfo(X.dtype)
            if not limits.min <= threshold < limits.max:
                return np.full(X.shape, threshold < limits.min)
            return X > X.dtype.type(threshold)
        return X > self.binarize

    def _smooth_dense(self, counts: DiscreteCounts, alpha: Alpha, class_log_prior: FloatArray) -> BernoulliTables:
        # A per-feature alpha smooths each feature's Bernoulli towards 1/2 with its own weight
        # (scikit-learn's own BernoulliNB fails on array alpha).
        log_p = np.log(counts.feature_count + alpha) - np.log(counts.class_count[:, None] + alpha * 2)
        log_not_p = np.log(1 - np.exp(log_p))
        # sum_f [x log p + (1 - x) log(1 - p)] = x . (log p - log(1 - p)) + sum_f log(1 - p)
        return BernoulliTables(class_log_prior_=class_log_prior, feature_log_prob_=log_p,
                               weights=weights_for_rows(log_p - log_not_p),
                               bias=class_log_prior + log_not_p.sum(axis=1))

    def _smooth_pairs(self, counts: PairCounts, alpha: float, class_log_prior: FloatArray) -> BernoulliPairTables:
        classes, _, pair_counts = counts.cells()
        log_class_total = np.log(counts.class_count + alpha * 2)
        log_p = np.log(pair_counts + alpha) - log_class_total[classes]
        log_not_p = np.log(1 - np.exp(log_p))  # as _smooth_dense computes it, for the same numbers
        unseen_log_p = np.log(alpha) - log_class_total
        unseen_log_not_p = np.log(1 - np.exp(unseen_log_p))
        unseen = unseen_log_p - unseen_log_not_p
        # sum_f log(1 - p) = n_features log(1 - p_unseen) + the difference at the pairs seen
        seen_not_p = np.bincount(classes, weights=log_not_p - unseen_log_not_p[classes], minlength=len(unseen))
        return BernoulliPairTables(class_log_prior_=class_log_prior, pair_weight=log_p - log_not_p - unseen[classes],
                                   unseen=unseen,
                                   bias=class_log_prior + self.n_features_in_ * unseen_log_not_p + seen_not_p)

    def _joint_log_likelihood(self, X: Features) -> FloatArray:
        tables = self._fresh_tables()
        if isinstance(tables, BernoulliPairTables):
            return self._pair_scores(X, tables.pair_weight, tables.unseen, tables.bias)
        return linear_scores(X, tables.weights, tables.bias)
