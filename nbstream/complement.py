"""Complement Naive Bayes (Rennie et al. 2003): robust to imbalanced text classes."""

from __future__ import annotations

import numpy as np

from .base import cached_table
from .discrete import DiscreteNB


class ComplementNB(DiscreteNB):
    """Complement Naive Bayes, streaming; scikit-learn's parameters and numbers.

    Each class is scored by how unlike the *other* classes' counts a row is.

    Parameters
    ----------
    alpha : float or array of shape (n_features,), default 1.0
    force_alpha : bool, default True
    fit_prior : bool, default True   used only when a single class has been seen
    class_prior : array of shape (n_classes,) or None
    norm : bool, default False        second normalisation of the weights
    half_life : float or None, default None

    Fitted attributes as MultinomialNB plus feature_all_ (n_features,).

    >>> model = ComplementNB().partial_fit([[3, 0], [0, 4]], ["x", "y"])
    >>> model.predict([[2, 0], [0, 1]]).tolist()
    ['x', 'y']
    """

    kind = "complement"
    requires_non_negative = True
    feature_all_ = cached_table()

    def __init__(self, *, alpha=1.0, force_alpha=True, fit_prior=True, class_prior=None,
                 norm=False, half_life=None):
        self.alpha = alpha
        self.force_alpha = force_alpha
        self.fit_prior = fit_prior
        self.class_prior = class_prior
        self.norm = norm
        self.half_life = half_life

    def _smooth(self, alpha, class_log_prior):
        feature_count = self._stats.feature_count
        feature_all = feature_count.sum(axis=0)
        complement = feature_all + alpha - feature_count
        logged = np.log(complement / complement.sum(axis=1, keepdims=True))
        log_weights = logged / logged.sum(axis=1, keepdims=True) if self.norm else -logged
        # A single class has no complement: its prior is the only information.
        bias = class_log_prior if len(class_log_prior) == 1 else np.zeros_like(class_log_prior)
        return {"feature_all_": feature_all, "feature_log_prob_": log_weights,
                "weights": log_weights.T, "bias": bias}
