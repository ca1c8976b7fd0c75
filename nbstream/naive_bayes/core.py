"""The core every streaming Naive Bayes model is built on: learning (forgetting, sliding
windows), the smoothed tables, predicting, fitted attributes and parameters.

A model supplies four things: the kind of its statistics (``_statistics_type``), how a
batch is made ready (``_prepare``), how the statistics become smoothed tables (``_refresh``)
and the joint log-likelihood from those tables (``_joint_log_likelihood``). Everything else
is here, once, or in the two parts ``NaiveBayes`` (``nbstream.naive_bayes.base``) adds: merging and the
learned state (``nbstream.naive_bayes.merging``), test-then-train (``nbstream.naive_bayes.prequential_scores``).
"""

from __future__ import annotations

import functools
import inspect
import numbers
from collections.abc import Callable
from typing import Any, ClassVar, Generic, Self, TypeVar

import numpy as np
import numpy.typing as npt

from ..stats import held as held_statistics
from ..stats.counts import Statistics
from ..stats.held import Held
from ..utils.blocked import log_normalize, normalized_exp
from ..utils.class_set import ClassSet, distinct_classes
from ..utils.ndarrays import AnyArray, Features, FloatArray, FloatingArray, IndexArray
from ..utils.parameters import Exclusive, Interval, ParameterRule, ParameterRules, Requires
from ..utils.sklearn_protocol import EstimatorProtocol, not_fitted
from ..utils.threads import blas_on_one_thread
from ..utils.validation import (
    NotFittedError,
    check_feature_names,
    check_labels,
    check_non_negative,
    check_sample_weight,
    check_X,
    feature_names_of,
    is_sparse,
)
from .state import KEPT_FLOAT_DTYPES
from .tables import TableCache, TablesT

StatsT = TypeVar("StatsT", bound=Statistics)


class NaiveBayesCore(EstimatorProtocol, Generic[StatsT, TablesT]):
    """What every model is before merging and test-then-train (see ``nbstream.naive_bayes.NaiveBayes``)."""

    kind: ClassVar[str] = ""  # the name a snapshot records and the registry knows
    requires_non_negative: ClassVar[bool] = False  # features are counts: negative values are refused
    _accept_sparse: ClassVar[bool] = True
    _keeps_float_dtype: ClassVar[bool] = False  # float attributes in the input's float dtype (GaussianNB)
    _statistics_type: type[StatsT]
    half_life: float | None
    window: int | None
    window_buckets: int
    layout_params: ClassVar[frozenset[str]] = frozenset()  # parameters of how statistics are held, not of the model
    # The rules of the parameters this class adds (``parameter_rules`` gathers them along the bases).
    _parameter_rules: ClassVar[ParameterRules] = ParameterRules((
        ParameterRule("half_life", "float", "Forget: an example's weight halves every half_life newer examples "
                      "(None: nothing is forgotten).", bounds=Interval(0, None, closed="neither"), optional=True),
        ParameterRule("window", "int", "Learn only the most recent examples: the model of exactly the last window "
                      "of them, less at most a bucket (None: every example).", bounds=Interval("window_buckets", None),
                      optional=True),
        ParameterRule("window_buckets", "int", "How many buckets the window is kept in: it moves a bucket of "
                      "window / window_buckets examples at a time, and costs window_buckets + 1 times the "
                      "statistics' memory.", bounds=Interval(1, None)),
    ), (Exclusive(("half_life", "window"), "a model either forgets gradually or keeps a window"),
        Requires("window_buckets", "window", "it sets how finely the window moves")))

    n_features_in_: int
    n_examples_seen_: int
    feature_names_in_: AnyArray
    _classes: ClassSet | None = None  # None until the model has learned
    _held: Held[StatsT]
    _cache: TableCache[TablesT]
    _float_dtype: np.dtype[Any]

    def _check_shapes(self, n_features: int, n_classes: int | None) -> None:
        """Raise ValueError when a per-feature or per-class parameter does not fit the data
        (n_classes is None while the class set is open)."""

    # ---- what each model supplies -------------------------------------------------------
    def _check_room(self, X: Features, class_set: ClassSet, labels: AnyArray, *, fresh: bool) -> None:
        """Refuse (ValueError), before anything changes, a prepared batch whose classes and values
        would grow the statistics past what this model holds at most; fresh: the batch starts the
        model afresh (fit). Most models hold whatever a batch brings."""

    def _new_statistics(self, n_features: int) -> StatsT:
        return self._statistics_type.empty(n_features)

    def _statistics_from(self, arrays: dict[str, AnyArray]) -> StatsT:
        """Statistics made of exported arrays (``Statistics.from_arrays``: ValueError when they do not fit)."""
        return self._statistics_type.from_arrays(arrays)

    def _merge_statistics(self, other: StatsT, rows: IndexArray) -> None:
        """Add another model's statistics; rows, shape (n_other_classes,): where its classes sit here."""
        self._stats.merge(other, rows)

    def _prepare(self, X: Features) -> Features:
        """Turn validated input into what the statistics and tables consume."""
        return X

    def _refresh(self) -> TablesT:
        """Smoothed tables computed from ``self._stats``."""
        raise NotImplementedError

    def _joint_log_likelihood(self, X: Features) -> FloatArray:
        """log P(x, c) up to a constant, shape (n_samples, n_classes)."""
        raise NotImplementedError

    def _refreshes_by_feature(self) -> bool:
        """Whether ``_refresh_features`` can bring the present tables up to date."""
        return False

    def _refresh_features(self, tables: TablesT, features: IndexArray) -> None:
        """Bring ``tables`` up to date in place after a batch that touched only ``features``
        (sorted indices) and the class counts; must give what ``_refresh`` would, bit for bit."""
        raise NotImplementedError

    def _smooths(self) -> bool:
        """Whether the smoothing parameters are positive, so that every table but the log priors is
        finite unless the statistics are too large for float64."""
        return True

    def _warn_before_learning(self) -> None:
        """Warn, as scikit-learn's fit and partial_fit do, about parameters that will be adjusted."""

    @classmethod
    @functools.cache  # one class's rules, read once
    def parameter_rules(cls) -> ParameterRules:
        """The rules of this model's parameters (``nbstream.utils.parameters``), in the constructor's
        order, with its defaults: what a command line needs to build its options.

        >>> from nbstream import GaussianNB
        >>> rule = GaussianNB.parameter_rules()["var_smoothing"]
        >>> rule.kind, rule.bounds.low, rule.default
        ('float', 0, 1e-09)
        """
        declared = ParameterRules(())
        for klass in reversed(cls.__mro__):  # each class declares its own; a subclass's replaces its base's
            own: ParameterRules | None = vars(klass).get("_parameter_rules")
            if own is not None:
                declared = declared.extended(*own, relations=own.relations)
        return declared.of_constructor(cls.__init__)

    def check_params(self) -> None:
        """Raise ValueError naming the first parameter whose value breaks its rules
        (``parameter_rules``)."""
        self.parameter_rules().check(self.get_params())

    # ---- learning ----------------------------------------------------------------------
    def partial_fit(self, X: Features, y: npt.ArrayLike, classes: npt.ArrayLike | None = None,
                    sample_weight: npt.ArrayLike | None = None) -> Self:
        """Learn from one batch.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features) or CSR (discrete models)
        y : array-like of shape (n_samples,)
        classes : array-like, optional
            On the first call: the full, fixed class set (labels outside it are errors), each
            class once. Omitted on the first call: the class set is open and grows as labels
            arrive.
        sample_weight : array-like of shape (n_samples,), optional

        Returns
        -------
        self
        """
        return self._learn(X, y, classes, sample_weight, restart=not self.is_fitted)

    def fit(self, X: Features, y: npt.ArrayLike, sample_weight: npt.ArrayLike | None = None) -> Self:
        """Forget everything, then learn from X, y with the fixed class set ``unique(y)``.

        Input that is refused leaves a previously fitted model as it was."""
        return self._learn(X, y, None, sample_weight, restart=True, classes_of_y=True)

    def _learn(self, X: Features, y: npt.ArrayLike, classes: npt.ArrayLike | None,
               sample_weight: npt.ArrayLike | None, *, restart: bool, classes_of_y: bool = False) -> Self:
        """Validate everything, then (re)start if asked and add the batch to the statistics.

        classes : as partial_fit takes it; classes_of_y: the fixed class set is unique(y) (fit)."""
        self.check_params()
        X, labels, weights, names = self._checked_batch(X, y, sample_weight, new_model=restart)
        listed = np.unique(labels) if classes_of_y else None if classes is None else distinct_classes(classes)
        float_dtype = self._float_dtype_of(X)
        X = self._prepare(X)
        if restart:
            class_set = ClassSet.open() if listed is None else ClassSet.fixed_from(listed)
            self._check_shapes(X.shape[1], len(class_set) if class_set.fixed else None)
            self._check_room(X, class_set, labels, fresh=True)
            rows = class_set.index(labels)  # an unknown label fails here, before any state changes
            self._warn_before_learning()
            self._start(class_set, X.shape[1], names, float_dtype)
        else:
            self._checked_held()
            class_set = self._class_set()
            if listed is not None:
                class_set.require_same(listed)
            # set_params may have changed alpha or the priors since the first batch
            self._check_shapes(X.shape[1], len(class_set) if class_set.fixed else None)
            self._check_room(X, class_set, labels, fresh=False)
            rows = class_set.index(labels)
            self._warn_before_learning()
        self._add_batch(X, rows, weights, len(class_set))
        self.n_examples_seen_ += X.shape[0]
        return self

    def _checked_batch(self, X: Features, y: npt.ArrayLike, sample_weight: npt.ArrayLike | None, *,
                       new_model: bool) -> tuple[Features, AnyArray, FloatArray | None, AnyArray | None]:
        """(X, labels (n_samples,), weights (n_samples,) or None, feature names or None) once
        checked: shapes, dtypes, counts where the model needs them, and unless ``new_model`` the
        fitted model's features and their names."""
        names = feature_names_of(X)
        X = check_X(X, n_features=None if new_model else self.n_features_in_,
                    accept_sparse=self._accept_sparse, model=type(self).__name__)
        if not new_model:
            check_feature_names(names, getattr(self, "feature_names_in_", None), type(self).__name__)
        labels = check_labels(y, X.shape[0])
        weights = check_sample_weight(sample_weight, X.shape[0])
        if self.requires_non_negative:
            check_non_negative(X, type(self).__name__)
        return X, labels, weights, names

    def _add_batch(self, X: Features, rows: IndexArray, weights: FloatArray | None, n_classes: int) -> None:
        """Add a validated, prepared batch to the statistics (to the window's newest buckets with
        ``window``) and note what the tables must refresh.

        rows : (n_samples,) the class row of each sample, of n_classes; weights : (n_samples,) or None"""
        window = self._held.sliding_window()
        if window is not None:
            window.grow(n_classes)
            window.update(X, rows, weights)
            self._cache.invalidate()  # a bucket leaving the window changes every feature it had
            return
        held = self._held.statistics()
        grew = len(held.class_count) < n_classes
        held.grow(n_classes)
        held.update(X, rows, self._forget(X.shape[0], weights))
        if self._cache.tables is not None and self._refreshes_by_feature() and is_sparse(X) and X.nnz \
                and self.half_life is None and not grew:  # (a batch of empty rows changes the priors only)
            self._note_touched(X.indices)  # a text batch touches few of 2^20 features
        else:
            self._cache.invalidate()

    def _float_dtype_of(self, X: Features) -> np.dtype[Any]:
        """The dtype of the float fitted attributes a first batch X gives (scikit-learn's rule)."""
        kept: np.dtype[Any] = np.dtype(X.dtype)
        return kept if self._keeps_float_dtype and kept.name in KEPT_FLOAT_DTYPES else np.dtype(np.float64)

    def _note_touched(self, features: IndexArray) -> None:
        """Remember features to refresh; once they add up to a quarter of all features (many
        batches learned between two predictions), a full refresh is cheaper."""
        if self._cache.touched.mark(features) > self.n_features_in_ // 4:
            self._cache.invalidate()

    def _start(self, class_set: ClassSet, n_features: int, feature_names: AnyArray | None,
               float_dtype: np.dtype[Any], held: Held[StatsT] | None = None) -> None:
        """Begin again from these classes and statistics (of their shape: the caller checked),
        or from none learned when held is None."""
        self._classes = class_set
        self._held = self._nothing_held(n_features) if held is None else held
        self._float_dtype = float_dtype
        self.n_features_in_ = n_features
        self.n_examples_seen_ = 0
        self._cache = TableCache(n_features)
        if feature_names is not None:
            self.feature_names_in_ = feature_names
        elif hasattr(self, "feature_names_in_"):
            del self.feature_names_in_

    # ---- what the model holds: all its statistics, or a window of them (``nbstream.stats.held``) --
    def _nothing_held(self, n_features: int) -> Held[StatsT]:
        """Statistics of nothing learned, in a window when the parameters ask for one."""
        return held_statistics.nothing_held(self._new_statistics(n_features), self.window, self.window_buckets)

    @property
    def _stats(self) -> StatsT:
        """The model's statistics: all it learned, or with ``window`` the merge of the window's
        buckets (computed when read after a change)."""
        return self._held.statistics()

    def _statistics_layout(self) -> type[Statistics] | None:
        """The type of the statistics held (None before any), without merging a window's buckets."""
        held = getattr(self, "_held", None)
        return None if held is None else held.layout

    def _checked_held(self) -> Held[StatsT]:
        """What the model holds, once checked to be what ``window`` and ``window_buckets`` say
        (ValueError when set_params changed them since the model began learning)."""
        held_statistics.check_window_unchanged(self._held, self.window, self.window_buckets)
        return self._held

    def _held_from(self, statistics: dict[str, AnyArray], n_classes: int, n_features: int,
                   examples_seen: int) -> Held[StatsT]:
        """What a model of these classes and features holds, made of exported arrays, once checked
        (ValueError when they are not what such a model could have learned)."""
        return held_statistics.held_from_arrays(statistics, window=self.window, n_buckets=self.window_buckets,
                                        empty=self._new_statistics, parse=self._statistics_from,
                                        n_classes=n_classes, n_features=n_features, examples_seen=examples_seen)

    def _change_statistics(self, change: Callable[[StatsT], None]) -> None:
        """Apply ``change`` to the statistics in place (to every bucket of a window); a change
        that raises leaves them as they were."""
        self._held.change(change)
        self._invalidate_tables()

    @property
    def n_examples_in_window_(self) -> int:
        """Examples the statistics hold: with ``window``, those of the window's buckets (a merged
        model's window unites the windows of both); without, every example learned."""
        in_window = self._held.examples_in_window if self.is_fitted else None
        return int(self.n_examples_seen_) if in_window is None else in_window

    def keep_newest(self, n_examples: int) -> Self:
        """Reset the window to its newest examples (after a drift, say): drop every bucket older
        than the newest ``n_examples`` (an integer >= 0). The newest bucket always stays, so the
        model keeps n_examples to n_examples plus one bucket (all it holds when that is fewer),
        and is then a fresh fit on exactly the examples of the buckets kept; its classes keep
        their places, and ``n_examples_seen_`` still counts every example learned. A model that
        has learned nothing stays as it is; one without ``window`` is refused (ValueError)."""
        if self.window is None:
            raise ValueError(f"keep_newest needs a model with a window; this {type(self).__name__} has window=None.")
        if not _is_integer(n_examples) or n_examples < 0:
            raise ValueError(f"keep_newest takes an integer >= 0; got {n_examples!r}.")
        if self.is_fitted:
            window = self._checked_held().sliding_window()
            assert window is not None  # as the window parameter says
            window.keep_newest(int(n_examples))
            self._cache.invalidate()
        return self

    def _forget(self, n_rows: int, weights: FloatArray | None) -> FloatArray | None:
        """Age the statistics by n_rows examples and weight the new rows by their age.

        The newest row keeps weight 1 and each older one loses a factor 0.5 per
        ``half_life`` rows, so the result does not depend on how the stream was chunked.
        """
        if self.half_life is None:
            return weights
        self._stats.scale(0.5 ** (n_rows / self.half_life))
        ages = np.arange(n_rows - 1, -1, -1, dtype=np.float64)
        decay: FloatArray = 0.5 ** (ages / self.half_life)
        return decay if weights is None else weights * decay

    # ---- fitted attributes -------------------------------------------------------------
    @property
    def is_fitted(self) -> bool:
        """Whether the model has learned from at least one batch (or merged a fitted model)."""
        return self._classes is not None

    def __sklearn_is_fitted__(self) -> bool:
        return self.is_fitted

    @property
    def classes_(self) -> AnyArray:
        """The class labels, shape (n_classes,): sorted for a fixed set, in order of first
        appearance for an open one."""
        return self._class_set().labels

    @property
    def class_count_(self) -> FloatingArray:
        """Weight of each class learned so far, shape (n_classes,)."""
        self._require_fitted()
        return self._stats.class_count

    def _class_set(self) -> ClassSet:
        if self._classes is None:
            raise not_fitted(NotFittedError, f"This {type(self).__name__} instance is not fitted yet: it has "
                             "not seen any data; call fit or partial_fit first.")
        return self._classes

    def _require_fitted(self) -> None:
        self._class_set()

    def _fresh_tables(self) -> TablesT:
        self._require_fitted()
        cache = self._cache
        if cache.tables is None:
            cache.touched.clear()
            cache.tables = self._refresh_in_full()
        elif cache.touched:
            self._refresh_features(cache.tables, cache.touched.take())
        return cache.tables

    def _refresh_in_full(self) -> TablesT:
        """The tables of the statistics, refused when they overflowed (ValueError) rather than
        left to predict NaN."""
        self.check_params()
        if not self._smooths():
            return self._refresh()  # a log of 0 is -inf, as in scikit-learn: not an error
        with np.errstate(all="ignore"):  # anything non-finite is refused just below
            tables = self._refresh()
        overflowed = tables.not_finite()
        if overflowed:
            raise ValueError(f"the tables {overflowed} of this {type(self).__name__} overflow float64: its statistics "
                             f"are too large for its parameters {self}.")
        return tables

    def _invalidate_tables(self) -> None:
        """Forget the smoothed tables after the statistics or parameters changed."""
        if self.is_fitted:
            self._cache.invalidate()

    # ---- prediction --------------------------------------------------------------------
    @blas_on_one_thread
    def predict_joint_log_proba(self, X: Features) -> FloatArray:
        """log P(x, c) for each row and class, shape (n_samples, n_classes)."""
        return self._joint_log_likelihood(self._prepared_for_prediction(X))

    def _prepared_for_prediction(self, X: Features) -> Features:
        """X checked as every prediction checks it (a fitted model, its features and their names),
        then prepared (``_prepare``), with the tables fresh."""
        self._fresh_tables()
        names = feature_names_of(X)
        X = check_X(X, n_features=self.n_features_in_, accept_sparse=self._accept_sparse,
                    model=type(self).__name__)
        check_feature_names(names, getattr(self, "feature_names_in_", None), type(self).__name__)
        return self._prepare(X)

    def predict_log_proba(self, X: Features) -> FloatArray:
        """log P(c | x), shape (n_samples, n_classes), columns in the order of ``classes_``."""
        return log_normalize(self.predict_joint_log_proba(X))

    def predict_proba(self, X: Features) -> FloatArray:
        """P(c | x), shape (n_samples, n_classes), columns in the order of ``classes_``."""
        return normalized_exp(self.predict_joint_log_proba(X))

    def predict(self, X: Features) -> AnyArray:
        """The most probable class of each row, shape (n_samples,)."""
        predicted: AnyArray = self.classes_[np.argmax(self.predict_joint_log_proba(X), axis=1)]
        return predicted

    def score(self, X: Features, y: npt.ArrayLike, sample_weight: npt.ArrayLike | None = None) -> float:
        """Mean accuracy of ``predict(X)`` against y."""
        predicted = self.predict(X)
        correct = predicted == check_labels(y, n_samples=len(predicted))
        return float(np.average(correct, weights=check_sample_weight(sample_weight, len(correct))))

    # ---- scikit-learn estimator protocol ------------------------------------------------
    _estimator_type = "classifier"

    @classmethod
    def param_names(cls) -> list[str]:
        """The constructor's parameter names, in order."""
        return [rule.name for rule in cls.parameter_rules()]

    def get_params(self, deep: bool = True) -> dict[str, object]:
        return {name: getattr(self, name) for name in self.param_names()}

    def set_params(self, **params: object) -> Self:
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
                   if not same_param(value, defaults[name].default)]
        return f"{type(self).__name__}({', '.join(changed)})"


def _is_integer(value: object) -> bool:
    """An integer (Python's or numpy's), and not a bool."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def same_param(a: object, b: object) -> bool:
    """Whether two parameter values are equal (arrays, lists and tuples element by element)."""
    if isinstance(a, (np.ndarray, list, tuple)) or isinstance(b, (np.ndarray, list, tuple)):
        try:
            return bool(np.array_equal(np.asarray(a), np.asarray(b)))
        except (TypeError, ValueError):
            return False
    return bool(a == b)

