"""Complement Naive Bayes (Rennie et al. 2003): robust to imbalanced text classes."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from .discrete import Alpha, DiscreteTables, FeatureCountsNB, weights_for_rows
from .kernels import linear_scores
from .ndarrays import Features, FloatArray


@dataclass
class ComplementTables(DiscreteTables):
    """feature_all_ : (n_features,) counts over all classes; feature_log_prob_ : (n_classes,
    n_features) the complement weights; a row's score is x . weights + bias, weights :
    (n_features, n_classes), bias : (n_classes,)."""

    feature_all_: FloatArray
    feature_log_prob_: FloatArray
    weights: FloatArray
    bias: FloatArray


class ComplementNB(FeatureCountsNB[ComplementTables]):
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
    norm: bool

    def __init__(self, *, alpha: float | npt.ArrayLike = 1.0, force_alpha: bool = True, fit_prior: bool = True,
                 class_prior: npt.ArrayLike | None = None, norm: bool = False, half_life: float | None = None):
        self.alpha = alpha
        self.force_alpha = force_alpha
        self.fit_prior = fit_prior
        self.class_prior = class_prior
        self.norm = norm
        self.half_life = half_life

    @property
    def feature_all_(self) -> FloatArray:
        """Weighted sum of each feature over all classes, shape (n_features,)."""
        return self._fresh_tables().feature_all_

    @property
    def feature_log_prob_(self) -> FloatArray:
        """The complement weights of each class and feature, shape (n_classes, n_features)."""
        return self._fresh_tables().feature_log_prob_

    def _smooth(self, alpha: Alpha, class_log_prior: FloatArray) -> ComplementTables:
        feature_count = self._stats.feature_count
        feature_all = feature_count.sum(axis=0)
        complement = feature_all + alpha - feature_count
        logged = np.log(complement / complement.sum(axis=1, keepdims=True))
        log_weights = logged / logged.sum(axis=1, keepdims=True) if self.norm else -logged
        # A single class has no complement: its prior is the only information.
        bias = class_log_prior if len(class_log_prior) == 1 else np.zeros_like(class_log_prior)
        return ComplementTables(class_log_prior_=class_log_prior, feature_all_=feature_all,
                                feature_log_prob_=log_weights, weights=weights_for_rows(log_weights), bias=bias)

    def _joint_log_likelihood(self, X: Features) -> FloatArray:
        tables = self._fresh_tables()
        return linear_scores(X, tables.weights, tables.bias)
