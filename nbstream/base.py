"""What every streaming Naive Bayes model shares: learning, forgetting, merging, predicting.

A model supplies four things: its statistics (``_new_statistics``), how a batch is made
ready (``_prepare``), how the statistics become smoothed tables (``_refresh``) and the joint
log-likelihood from those tables (``_joint_log_likelihood``). Everything else is here, once.
"""

from __future__ import annotations

import inspect

import numpy as np

from .kernels import log_normalize
from .labels import ClassSet
from .sklearn_compat import EstimatorProtocol, not_fitted
from .validation import (NotFittedError, check_feature_names, check_labels, check_non_negative,
                         check_positive, check_sample_weight, check_X, feature_names_of, is_sparse)


_CLASSES_OF_Y = object()  # fit's class set: the labels it is given


class TouchedFeatures:
    """The features whose statistics changed since the tables were last refreshed: a mask over
    the features, so a batch is noted in one scatter of its column indices (no sort)."""

    def __init__(self, n_features: int):
        self.n_features = n_features
        self._mask: np.ndarray | None = None  # shape (n_features,) of bool, made at the first mark
        self._marked = 0  # indices marked since the last take: an upper bound of the features touched

    def mark(self, features: np.ndarray) -> int:
        """Note these feature indices (repeats allowed); returns how many features are touched."""
        if self._mask is None:
            self._mask = np.zeros(self.n_features, dtype=bool)
        self._mask[features] = True
        self._marked += len(features)
        if self._marked > self.n_features // 8:  # count only when the bound says it could matter
            self._marked = int(np.count_nonzero(self._mask))
        return self._marked

    def take(self) -> np.ndarray:
        """The touched features, sorted, shape (n_touched,); none are touched after."""
        features = np.flatnonzero(self._mask)
        self._mask[features] = False
        self._marked = 0
        return features

    def clear(self) -> None:
        if self._marked:
            self._mask[:] = False
            self._marked = 0

    def __bool__(self) -> bool:
        return self._marked > 0


class cached_table:
    """A fitted attribute derived from the statistics, recomputed only when it is read
    after the statistics changed (scikit-learn recomputes on every partial_fit).

    The tables live in one dict that is emptied when the statistics change and filled when
    read, so predicting never rebinds the estimator's attributes."""

    def __set_name__(self, owner, name):
        self.name = name

    def __get__(self, model, owner=None):
        if model is None:
            return self
        return model._fresh_tables()[self.name]


class NaiveBayes(EstimatorProtocol):
    """Base class; see the five models for parameters and examples."""

    kind: str = ""  # the name a snapshot records and the registry knows
    requires_non_negative: bool = False  # features are counts: negative values are refused
    _accept_sparse = True

    def _check_shapes(self, n_features: int, n_classes: int | None) -> None:
        """Raise ValueError when a per-feature or per-class parameter does not fit the data
        (n_classes is None while the class set is open)."""

    # ---- what each model supplies -------------------------------------------------------
    def _new_statistics(self, n_features: int):
        raise NotImplementedError

    def _prepare(self, X):
        """Turn validated input into what the statistics and tables consume."""
        return X

    def _refresh(self) -> dict[str, object]:
        """Smoothed tables computed from ``self._stats``."""
        raise NotImplementedError

    def _joint_log_likelihood(self, X) -> np.ndarray:
        """log P(x, c) up to a constant, shape (n_samples, n_classes)."""
        raise NotImplementedError

    _refreshes_features = False  # whether _refresh_features is supplied

    def _refresh_features(self, tables: dict[str, object], features: np.ndarray) -> None:
        """Bring ``tables`` up to date in place after a batch that touched only ``features``
        (sorted indices) and the class counts; must give what ``_refresh`` would, bit for bit."""
        raise NotImplementedError

    def check_params(self) -> None:
        """Raise ValueError naming the first parameter whose value is invalid."""
        check_positive(self.half_life, "half_life", allow_none=True)

    # ---- learning ----------------------------------------------------------------------
    def partial_fit(self, X, y, classes=None, sample_weight=None):
        """Learn from one batch.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features) or CSR (discrete models)
        y : array-like of shape (n_samples,)
        classes : array-like, optional
            On the first call: the full, fixed class set (labels outside it are errors).
            Omitted on the first call: the class set is open and grows as labels arrive.
        sample_weight : array-like of shape (n_samples,), optional

        Returns
        -------
        self
        """
        return self._learn(X, y, classes, sample_weight, restart=not self.is_fitted)

    def fit(self, X, y, sample_weight=None):
        """Forget everything, then learn from X, y with the fixed class set ``unique(y)``.

        Input that is refused leaves a previously fitted model as it was."""
        return self._learn(X, y, _CLASSES_OF_Y, sample_weight, restart=True)

    def _learn(self, X, y, classes, sample_weight, *, restart: bool):
        """Validate everything, then (re)start if asked and add the batch to the statistics.

        classes : as partial_fit takes it, or _CLASSES_OF_Y for the fixed set unique(y) (fit)."""
        self.check_params()
        names = feature_names_of(X)
        X = check_X(X, n_features=None if restart else self.n_features_in_,
                    accept_sparse=self._accept_sparse, model=type(self).__name__)
        if not restart:
            check_feature_names(names, getattr(self, "feature_names_in_", None), type(self).__name__)
        y = check_labels(y, X.shape[0])
        if classes is _CLASSES_OF_Y:
            classes = np.unique(y)
        weights = check_sample_weight(sample_weight, X.shape[0])
        if self.requires_non_negative:
            check_non_negative(X, type(self).__name__)
        X = self._prepare(X)
        if restart:
            class_set = ClassSet.open() if classes is None else ClassSet.fixed_from(classes)
            self._check_shapes(X.shape[1], len(class_set) if class_set.fixed else None)
            rows = class_set.index(y)  # an unknown label fails here, before any state changes
            self._start(class_set, X.shape[1], names)
        else:
            if classes is not None and not np.array_equal(np.unique(classes), np.unique(self.classes_)):
                raise ValueError(f"classes={np.unique(classes).tolist()} differs from the classes "
                                 f"{self.classes_.tolist()} of the first partial_fit.")
            rows = self._classes.index(y)
        n_classes = len(self._stats.class_count)
        self._stats.grow(len(self._classes))
        self._stats.update(X, rows, self._forget(X.shape[0], weights))
        self.n_examples_seen_ += X.shape[0]
        if self._tables and self._refreshes_features and is_sparse(X) and self.half_life is None \
                and n_classes == len(self._classes):
            self._note_touched(X.indices)  # a text batch touches few of 2^20 features
        else:
            self._invalidate_tables()
        return self

    def _note_touched(self, features: np.ndarray) -> None:
        """Remember features to refresh; once they add up to a quarter of all features (many
        batches learned between two predictions), a full refresh is cheaper."""
        if self._touched.mark(features) > self.n_features_in_ // 4:
            self._invalidate_tables()

    def _start(self, class_set: ClassSet, n_features: int, feature_names: np.ndarray | None = None) -> None:
        self._classes = class_set
        self._stats = self._new_statistics(n_features)
        self.n_features_in_ = n_features
        self.n_examples_seen_ = 0
        self._tables = {}
        self._touched = TouchedFeatures(n_features)  # since the tables were refreshed
        if feature_names is not None:
            self.feature_names_in_ = feature_names
        elif hasattr(self, "feature_names_in_"):
            del self.feature_names_in_

    def _forget(self, n_rows: int, weights: np.ndarray | None) -> np.ndarray | None:
        """Age the statistics by n_rows examples and weight the new rows by their age.

        The newest row keeps weight 1 and each older one loses a factor 0.5 per
        ``half_life`` rows, so the result does not depend on how the stream was chunked.
        """
        if self.half_life is None:
            return weights
        self._stats.scale(0.5 ** (n_rows / self.half_life))
        ages = np.arange(n_rows - 1, -1, -1, dtype=np.float64)
        decay = 0.5 ** (ages / self.half_life)
        return decay if weights is None else weights * decay

    def differing_params(self, other: "NaiveBayes") -> list[str]:
        """Names of the parameters whose values differ from another model's of the same kind."""
        theirs = other.get_params()
        return [name for name, value in self.get_params().items() if not _same_param(value, theirs.get(name))]

    def merge(self, other: "NaiveBayes") -> "NaiveBayes":
        """Add another model's statistics into this one and return this one.

        Both must be the same kind, with the same parameters and feature count. Models
        trained on parts of a stream merge into the model trained on the whole; classes
        the other model knows and this (open) one does not are appended.
        """
        if type(other) is not type(self):
            raise TypeError(f"cannot merge a {type(other).__name__} into a {type(self).__name__}.")
        differing = self.differing_params(other)
        if differing:
            raise ValueError(f"cannot merge models whose parameters differ: {differing}.")
        if not other.is_fitted:
            return self
        if not self.is_fitted:
            self._start(ClassSet(other.classes_.copy(), other._classes.fixed), other.n_features_in_,
                        getattr(other, "feature_names_in_", None))
        elif other.n_features_in_ != self.n_features_in_:
            raise ValueError(f"cannot merge: this model has {self.n_features_in_} features, "
                             f"the other {other.n_features_in_}.")
        rows = self._classes.rows_for(other._classes)
        self._stats.grow(len(self._classes))
        self._stats.merge(other._stats, rows)
        self.n_examples_seen_ += other.n_examples_seen_
        self._invalidate_tables()
        return self

    # ---- fitted attributes -------------------------------------------------------------
    @property
    def is_fitted(self) -> bool:
        """Whether the model has learned from at least one batch (or merged a fitted model)."""
        return getattr(self, "_classes", None) is not None

    def __sklearn_is_fitted__(self) -> bool:
        return self.is_fitted

    @property
    def classes_(self) -> np.ndarray:
        self._require_fitted()
        return self._classes.labels

    @property
    def class_count_(self) -> np.ndarray:
        self._require_fitted()
        return self._stats.class_count

    def _require_fitted(self) -> None:
        if not self.is_fitted:
            raise not_fitted(NotFittedError, f"This {type(self).__name__} instance is not fitted yet: it has "
                             "not seen any data; call fit or partial_fit first.")

    def _fresh_tables(self) -> dict[str, object]:
        self._require_fitted()
        if not self._tables:
            self.check_params()
            self._touched.clear()
            self._tables.update(self._refresh())
        elif self._touched:
            self._refresh_features(self._tables, self._touched.take())
        return self._tables

    def _invalidate_tables(self) -> None:
        """Forget the smoothed tables after the statistics or parameters changed."""
        if self.is_fitted:
            self._tables.clear()
            self._touched.clear()

    # ---- prediction --------------------------------------------------------------------
    def predict_joint_log_proba(self, X) -> np.ndarray:
        """log P(x, c) for each row and class, shape (n_samples, n_classes)."""
        self._fresh_tables()
        names = feature_names_of(X)
        X = check_X(X, n_features=self.n_features_in_, accept_sparse=self._accept_sparse,
                    model=type(self).__name__)
        check_feature_names(names, getattr(self, "feature_names_in_", None), type(self).__name__)
        return self._joint_log_likelihood(self._prepare(X))

    def predict_log_proba(self, X) -> np.ndarray:
        """log P(c | x), shape (n_samples, n_classes), columns in the order of ``classes_``."""
        return log_normalize(self.predict_joint_log_proba(X))

    def predict_proba(self, X) -> np.ndarray:
        """P(c | x), shape (n_samples, n_classes), columns in the order of ``classes_``."""
        return np.exp(self.predict_log_proba(X))

    def predict(self, X) -> np.ndarray:
        """The most probable class of each row, shape (n_samples,)."""
        return self.classes_[np.argmax(self.predict_joint_log_proba(X), axis=1)]

    def score(self, X, y, sample_weight=None) -> float:
        """Mean accuracy of ``predict(X)`` against y."""
        predicted = self.predict(X)
        correct = predicted == check_labels(y, n_samples=len(predicted))
        return float(np.average(correct, weights=check_sample_weight(sample_weight, len(correct))))

    # ---- scikit-learn estimator protocol ------------------------------------------------
    _estimator_type = "classifier"

    @classmethod
    def param_names(cls) -> list[str]:
        """The constructor's parameter names, in order."""
        return [name for name in inspect.signature(cls.__init__).parameters if name != "self"]

    def get_params(self, deep: bool = True) -> dict[str, object]:
        return {name: getattr(self, name) for name in self.param_names()}

    def set_params(self, **params) -> "NaiveBayes":
        unknown = set(params) - set(self.param_names())
        if unknown:
            raise ValueError(f"unknown parameter(s) {sorted(unknown)} for {type(self).__name__}; "
                             f"valid: {self.param_names()}.")
        for name, value in params.items():
            setattr(self, name, value)
        self._invalidate_tables()
        return self

    def __repr__(self) -> str:
        defaults = inspect.signature(type(self).__init__).parameters
        changed = [f"{name}={value!r}" for name, value in self.get_params().items()
                   if not _same_param(value, defaults[name].default)]
        return f"{type(self).__name__}({', '.join(changed)})"


def _same_param(a, b) -> bool:
    if isinstance(a, (np.ndarray, list, tuple)) or isinstance(b, (np.ndarray, list, tuple)):
        try:
            return np.array_equal(np.asarray(a), np.asarray(b))
        except (TypeError, ValueError):
            return False
    return a == b
