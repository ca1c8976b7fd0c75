"""Categorical Naive Bayes: each feature takes one of a few categories, coded 0, 1, 2, ..."""

from __future__ import annotations

import numpy as np

from .base import cached_table
from .discrete import DiscreteNB
from .stats import CategoryCounts


class CategoricalNB(DiscreteNB):
    """Naive Bayes for categorical features, streaming; scikit-learn's parameters and numbers.

    Parameters
    ----------
    alpha : float, default 1.0   additive smoothing
    force_alpha : bool, default True
    fit_prior : bool, default True
    class_prior : array of shape (n_classes,) or None
    min_categories : int, array of shape (n_features,) or None
        Minimum number of categories per feature (codes 0..min_categories-1).
    half_life : float or None, default None

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
    _alpha_may_be_array = False
    _categorical_input = True
    n_categories_ = cached_table()

    def __init__(self, *, alpha=1.0, force_alpha=True, fit_prior=True, class_prior=None,
                 min_categories=None, half_life=None):
        self.alpha = alpha
        self.force_alpha = force_alpha
        self.fit_prior = fit_prior
        self.class_prior = class_prior
        self.min_categories = min_categories
        self.half_life = half_life

    def _check_shapes(self, n_features: int, n_classes: int | None) -> None:
        super()._check_shapes(n_features, n_classes)
        if self.min_categories is not None:
            minimum = np.asarray(self.min_categories)
            if minimum.dtype.kind not in "iu" or (minimum < 1).any() or minimum.ndim > 1 \
                    or (minimum.ndim == 1 and minimum.shape != (n_features,)):
                raise ValueError(f"min_categories must be a positive integer or one per feature "
                                 f"({n_features}); got {self.min_categories!r}.")

    def _new_statistics(self, n_features: int):
        counts = CategoryCounts.empty(n_features)
        if self.min_categories is not None:
            counts.widen(np.broadcast_to(np.asarray(self.min_categories), (n_features,)))
        return counts

    @property
    def category_count_(self) -> list[np.ndarray]:
        self._require_fitted()
        return self._stats.category_count

    def recode_categories(self, new_codes: list[np.ndarray]) -> "CategoricalNB":
        """Move category j of feature i to code new_codes[i][j] (to merge models whose
        category codes were assigned in different orders). Returns self."""
        self._require_fitted()
        self._stats.recode(new_codes)
        self._invalidate_tables()
        return self

    @property
    def feature_count_(self):
        raise AttributeError("CategoricalNB keeps category_count_, not feature_count_.")

    def _prepare(self, X):
        """Category codes as integers; floats are accepted only when integral."""
        if X.dtype.kind in "if" and X.size and X.min() < 0:
            raise ValueError(f"Negative values in data passed to CategoricalNB: category codes start at 0; "
                             f"got {X.min()}.")
        if X.dtype.kind == "f":
            if (X != np.floor(X)).any():
                raise ValueError("CategoricalNB expects integer category codes; got fractional values.")
            X = X.astype(np.int64)
        if X.dtype.kind == "b":
            X = X.view(np.uint8)
        return X

    def _smooth(self, alpha, class_log_prior):
        tables = [table + alpha for table in self._stats.category_count]
        log_prob = [np.log(t) - np.log(t.sum(axis=1, keepdims=True)) for t in tables]
        # Per feature, one row per code plus a zero row that unseen codes point to.
        by_code = [np.vstack([t.T, np.zeros((1, len(class_log_prior)))]) for t in log_prob]
        return {"feature_log_prob_": log_prob, "log_prob_by_code": by_code,
                "n_categories_": np.array([t.shape[1] for t in log_prob], dtype=np.int64),
                "bias": class_log_prior}

    def _joint_log_likelihood(self, X) -> np.ndarray:
        tables = self._fresh_tables()
        scores = np.zeros((X.shape[0], len(tables["bias"])))
        for table, codes in zip(tables["log_prob_by_code"], np.ascontiguousarray(X.T)):
            unseen = np.int64(table.shape[0] - 1)
            scores += table.take(np.minimum(codes, unseen), axis=0)
        scores += tables["bias"]
        return scores
