"""Multinomial Naive Bayes: counts (word counts, pixel intensities)."""

from __future__ import annotations

import numpy as np

from .discrete import DiscreteNB


class MultinomialNB(DiscreteNB):
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

    def __init__(self, *, alpha=1.0, force_alpha=True, fit_prior=True, class_prior=None,
                 half_life=None):
        self.alpha = alpha
        self.force_alpha = force_alpha
        self.fit_prior = fit_prior
        self.class_prior = class_prior
        self.half_life = half_life

    def _smooth(self, alpha, class_log_prior):
        counts = self._stats.feature_count
        # Written straight into the (n_features, n_classes) layout the sparse product wants:
        # half the time of computing (n_classes, n_features) and transposing a copy; one
        # class at a time, so a refresh needs one row of scratch, not a copy of the counts.
        weights = np.empty(counts.shape[::-1])
        smoothed = np.empty(counts.shape[1])
        for c, row in enumerate(counts):
            np.add(row, alpha, out=smoothed)
            np.log(smoothed, out=weights[:, c])
            weights[:, c] -= np.log(smoothed.sum())
        return {"feature_log_prob_": weights.T, "weights": weights, "bias": class_log_prior}
