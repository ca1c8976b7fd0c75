"""One model per key on one stream (``KeyedNB``): per user, tenant or author, each backed off
exactly to the group's model, the model of every key's examples together.

Counts add, so the group's counts are exactly the sum of the keys' and a key's model can be
smoothed toward the group's with no approximation (``nbstream.naive_bayes.backoff``). A key holds
only the (class, feature) pairs its examples brought.
"""

from __future__ import annotations

import math
import numbers
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Self, cast

import numpy as np
import numpy.typing as npt

from ..stats.keyed_counts import Key, KeyedCounts, grouped
from ..utils.blocked import normalized_exp
from ..utils.class_set import ClassSet
from ..utils.ndarrays import AnyArray, Features, FloatArray
from ..utils.validation import NotFittedError, check_labels, check_sample_weight, check_X
from .backoff import PseudoCounts, key_model, pseudo_counts
from .base import NaiveBayes
from .discrete import FeatureCountsNB
from .explanations import Explanations
from .keyed_prequential import predict_then_learn_keys
from .keyed_scores import Backoff, backoff_of, keyed_joint_log_likelihood
from .kinds import model_class
from .multinomial import MultinomialNB
from .state import ModelState

KEYED_KINDS = ("bernoulli", "multinomial", "complement")
_KEY_MODELS_KEPT = 64  # the models of the keys last asked, kept until anything learns
DEFAULT_PRIOR_WEIGHT = 10.0  # m: a key's model leans on the group's as on ten of its own examples


@dataclass(frozen=True)
class KeyedState:
    """A keyed model's learned state as plain values and arrays (what a snapshot stores).

    group : the group model's state (``ModelState``)
    prior_weight : m
    keys : the keys, in order of first appearance (strings or integers, not both)
    classes : the labels of the keys' class rows
    statistics : the keys' counts as ``KeyedCounts.arrays`` gives them, in the order of ``keys``
    """

    group: ModelState
    prior_weight: float
    keys: list[Key]
    classes: AnyArray
    statistics: dict[str, AnyArray]


def checked_keys(keys: npt.ArrayLike | Sequence[Key], n_samples: int) -> list[Key]:
    """One key per sample, as a list of str or of int (numpy's scalars become Python's): ValueError
    for another count, another type (a bool, a float, None) or strings mixed with integers."""
    given = keys.tolist() if isinstance(keys, np.ndarray) else list(keys)  # type: ignore[arg-type]
    if len(given) != n_samples:
        raise ValueError(f"keys must give one key per sample: {len(given)} keys for {n_samples} samples.")
    checked = [_plain_key(key) for key in given]
    if len({type(key) for key in checked}) > 1:
        raise ValueError("keys must be all strings or all integers, not both.")
    return checked


def _check_key_type(kind: type | None, key: Key | None) -> None:
    """ValueError unless ``key`` is of the type the keys are (kind; None: no keys yet)."""
    if kind is not None and key is not None and type(key) is not kind:
        raise ValueError(f"this model's keys are {kind.__name__}s; got the {type(key).__name__} key {key!r}.")


def _plain_key(key: object) -> Key:
    if isinstance(key, np.generic):
        key = key.item()
    if isinstance(key, bool) or not isinstance(key, str | int):
        raise ValueError(f"a key must be a string or an integer; got {key!r} ({type(key).__name__}).")
    return key


def backed_off_model(group: NaiveBayes[Any, Any], counts: KeyedCounts, key: Key, prior_weight: float
                     ) -> NaiveBayes[Any, Any]:
    """The model of ``key`` (whose counts are in ``counts``) backed off by ``prior_weight`` to the
    fitted ``group`` model, as a model of the group's family (dense counts); the group's model
    itself for a key never seen. ValueError for a group of a family that is not keyed."""
    if group.kind not in KEYED_KINDS:
        raise ValueError(f"a keyed model is one of {list(KEYED_KINDS)}; got a {type(group).__name__}.")
    if key not in counts:
        return group
    family = cast(FeatureCountsNB[Any], group)
    return key_model(family, counts.cells_of([key], group.classes_), counts.examples(key),
                     pseudo_counts(family, float(prior_weight)))


class KeyedNB:
    """A Naive Bayes model per key, each backed off to the group's model by ``prior_weight``.

    Parameters
    ----------
    model : BernoulliNB, MultinomialNB or ComplementNB, default MultinomialNB()
        The family and its parameters (the model itself is not fitted; it is a template).
        Forgetting (half_life, window) is refused: a key's counts would fade at its own pace.
    prior_weight : float >= 0, default 10.0
        m: each key's model holds its counts plus m pseudo-examples drawn from the group's model
        (``nbstream.naive_bayes.backoff`` gives the formula). 0: each key's own model.

    Fitted attributes: group_model_ (the model of all examples, exactly the unkeyed fit),
    classes_ (n_classes,), n_keys_, n_examples_seen_.

    CategoricalNB and GaussianNB are not keyed models yet: a key's categories, or its moments,
    backed off to the group's would hold a dense table per key.

    >>> keyed = KeyedNB(prior_weight=0).partial_fit([[3, 0], [0, 2], [1, 1]], ["spam", "ham", "ham"],
    ...                                              keys=["ann", "ann", "bob"])
    >>> keyed.predict([[2, 0], [2, 0]], keys=["ann", "bob"]).tolist()
    ['spam', 'ham']
    """

    group_model_: FeatureCountsNB[Any]
    _keys: KeyedCounts

    def __init__(self, model: NaiveBayes[Any, Any] | None = None, *, prior_weight: float = DEFAULT_PRIOR_WEIGHT):
        self.model = model
        self.prior_weight = prior_weight
        self._learned()

    # ---- parameters -------------------------------------------------------------------------
    def get_params(self, deep: bool = True) -> dict[str, Any]:
        return {"model": self.model, "prior_weight": self.prior_weight}

    def set_params(self, **params: Any) -> Self:
        for name, value in params.items():
            if name not in ("model", "prior_weight"):
                raise ValueError(f"KeyedNB has no parameter {name!r}; it has model and prior_weight.")
            setattr(self, name, value)
        self._models = OrderedDict[Key, NaiveBayes[Any, Any]]()
        return self

    def check_params(self) -> None:
        """ValueError naming the parameter that cannot make a keyed model."""
        m = self.prior_weight
        if not isinstance(m, numbers.Real) or isinstance(m, bool) or not math.isfinite(m) or m < 0:
            raise ValueError(f"prior_weight must be a finite number >= 0; got {m!r}.")
        template = self._template()
        if template.kind not in KEYED_KINDS:
            raise ValueError(f"a keyed model is one of {list(KEYED_KINDS)}; got a {type(template).__name__}.")
        if template.half_life is not None or template.window is not None:
            raise ValueError("a keyed model does not forget: its model must have half_life=None and window=None.")
        template.check_params()

    def _template(self) -> FeatureCountsNB[Any]:
        model = MultinomialNB() if self.model is None else self.model
        if not isinstance(model, NaiveBayes):
            raise ValueError(f"model must be an nbstream model; got {type(model).__name__}.")
        return model  # type: ignore[return-value]  # its kind is checked by check_params

    # ---- learning ---------------------------------------------------------------------------
    def partial_fit(self, X: Features, y: npt.ArrayLike, keys: npt.ArrayLike | Sequence[Key],
                    classes: npt.ArrayLike | None = None, sample_weight: npt.ArrayLike | None = None) -> Self:
        """Learn a batch into the group's model and each row's key's.

        X : (n_samples, n_features) dense or CSR; y : (n_samples,); keys : (n_samples,) strings or
        integers; classes, sample_weight : as ``partial_fit`` of the model takes them.
        """
        self.check_params()
        listed = check_labels(y, None)
        checked = checked_keys(keys, len(listed))
        if hasattr(self, "group_model_"):
            _check_key_type(self._keys.key_type(), checked[0] if checked else None)
        weights = check_sample_weight(sample_weight, len(listed))
        group = getattr(self, "group_model_", None)
        if group is None:
            group = type(self._template())(**self._template().get_params())
        group.partial_fit(X, y, classes=classes, sample_weight=sample_weight)  # checks X against y
        if not hasattr(self, "group_model_"):
            self.group_model_, self._keys = group, KeyedCounts(group.n_features_in_)
        prepared = group._prepare(check_X(X, n_features=group.n_features_in_, accept_sparse=True,
                                          model=type(group).__name__))
        self._keys.update(prepared, listed, weights, checked)
        self._learned()
        return self

    def predict_then_learn(self, X: Features, y: npt.ArrayLike, keys: npt.ArrayLike | Sequence[Key]
                           ) -> tuple[AnyArray, FloatArray]:
        """Test-then-train a batch: each row's probabilities under its key's model as the rows before
        it left it (its key's counts, and its own earlier rows here), backed off to the group's
        model as it was before the batch; then the batch is learned. Returns (classes (C,), proba
        (n, C)) over the classes known before the batch (a class new in it is predicted from the
        next batch on). The model must have learned something before (NotFittedError)."""
        group = self._group()
        X = check_X(X, n_features=group.n_features_in_, accept_sparse=True, model=type(self).__name__)
        listed = check_labels(y, X.shape[0])
        checked = checked_keys(keys, len(listed))
        _check_key_type(self._keys.key_type(), checked[0] if checked else None)
        classes = group.classes_.copy()
        class_set = group._class_set()
        ClassSet(class_set.labels.copy(), fixed=class_set.fixed).index(listed)  # refuses labels outside, first
        scores, _ = predict_then_learn_keys(group, self._backoff(), self._keys, X, checked,
                                            np.ones(len(listed), dtype=bool), listed)
        assert scores is not None  # the group is fitted
        group.partial_fit(X, y)
        self._learned()
        return classes, normalized_exp(scores)

    def _learned(self) -> None:
        self._models = OrderedDict()
        self._pseudo: PseudoCounts | None = None
        self._tables: Backoff | None = None

    # ---- what it learned --------------------------------------------------------------------
    def _group(self) -> FeatureCountsNB[Any]:
        group = getattr(self, "group_model_", None)
        if group is None:
            raise NotFittedError("This KeyedNB instance is not fitted yet. Call 'partial_fit' first.")
        return group  # type: ignore[no-any-return]

    @property
    def classes_(self) -> AnyArray:
        return self._group().classes_

    @property
    def n_keys_(self) -> int:
        """Keys that have learned something."""
        self._group()
        return len(self._keys)

    @property
    def n_examples_seen_(self) -> int:
        return self._group().n_examples_seen_

    def keys(self) -> list[Key]:
        """The keys that have learned, in order of first appearance."""
        self._group()
        return self._keys.keys()

    def key_examples(self, keys: npt.ArrayLike | Sequence[Key]) -> AnyArray:
        """How many examples each key learned (0 for a key never seen), shape (n_keys,) int64."""
        self._group()
        checked = checked_keys(keys, len(keys))  # type: ignore[arg-type]
        return np.array([self._keys.examples(key) for key in checked], dtype=np.int64)

    def drop_keys(self, keys: npt.ArrayLike | Sequence[Key]) -> Self:
        """Forget these keys' own counts (those it holds): each is answered by the group's model
        again. The group's model keeps what they taught it."""
        self._group()
        self._keys.drop(checked_keys(keys, len(keys)))  # type: ignore[arg-type]
        self._learned()
        return self

    def key_model(self, key: Key) -> NaiveBayes[Any, Any]:
        """The key's model backed off to the group's, as a model of the family (dense counts); the
        group's model for a key never seen. The same object until anything learns: do not change it."""
        group = self._group()
        _check_key_type(self._keys.key_type(), _plain_key(key))
        if key not in self._keys:
            return group
        model = self._models.get(key)
        if model is None:
            cells = self._keys.cells_of([key], group.classes_)
            model = self._models[key] = key_model(group, cells, self._keys.examples(key), self._pseudo_counts())
            if len(self._models) > _KEY_MODELS_KEPT:
                self._models.popitem(last=False)
        else:
            self._models.move_to_end(key)
        return model

    # ---- predicting -------------------------------------------------------------------------
    def predict_joint_log_proba(self, X: Features, keys: npt.ArrayLike | Sequence[Key]) -> FloatArray:
        """log P(x, c) of each row under its key's model, shape (n_samples, n_classes)."""
        group = self._group()
        X = group._prepared_for_prediction(X)
        checked = checked_keys(keys, X.shape[0])
        _check_key_type(self._keys.key_type(), checked[0] if checked else None)
        scores = np.empty((X.shape[0], len(group.classes_)))
        by_key = grouped(checked)
        known = [key for key in by_key if key in self._keys]
        unknown = [rows for key, rows in by_key.items() if key not in self._keys]
        if unknown:
            rows = np.concatenate(unknown)
            scores[rows] = group._joint_log_likelihood(X[rows])
        if known:
            rows = np.concatenate([by_key[key] for key in known])
            slots = np.repeat(np.arange(len(known)), [len(by_key[key]) for key in known])
            cells = self._keys.cells_of(known, group.classes_)  # type: ignore[arg-type]
            scores[rows] = keyed_joint_log_likelihood(group, self._backoff(), X[rows], slots, cells)
        return scores

    def _backoff(self) -> Backoff:
        """The tables every key's scores share (computed once after anything learned)."""
        if self._tables is None:
            self._tables = backoff_of(self._group(), float(self.prior_weight))
        return self._tables

    def _pseudo_counts(self) -> PseudoCounts:
        if self._pseudo is None:
            self._pseudo = pseudo_counts(self._group(), float(self.prior_weight))
        return self._pseudo

    def predict_proba(self, X: Features, keys: npt.ArrayLike | Sequence[Key]) -> FloatArray:
        """P(c | x) of each row under its key's model, shape (n_samples, n_classes)."""
        return normalized_exp(self.predict_joint_log_proba(X, keys))

    def predict_log_proba(self, X: Features, keys: npt.ArrayLike | Sequence[Key]) -> FloatArray:
        probabilities = self.predict_proba(X, keys)
        with np.errstate(divide="ignore"):
            logged: FloatArray = np.log(probabilities)
        return logged

    def predict(self, X: Features, keys: npt.ArrayLike | Sequence[Key]) -> AnyArray:
        """Each row's most probable class under its key's model, shape (n_samples,)."""
        labels: AnyArray = self.classes_[np.argmax(self.predict_joint_log_proba(X, keys), axis=1)]
        return labels

    def explain(self, X: Features, keys: npt.ArrayLike | Sequence[Key], top: int | None = 10) -> Explanations:
        """Each row's prediction explained by its key's model (see the model's ``explain``)."""
        group = self._group()
        X = check_X(X, n_features=group.n_features_in_, accept_sparse=True, model=type(self).__name__)
        checked = checked_keys(keys, X.shape[0])
        _check_key_type(self._keys.key_type(), checked[0] if checked else None)
        parts = [(rows, self.key_model(key).explain(X[rows], top))  # type: ignore[arg-type]
                 for key, rows in grouped(checked).items()]
        return _stitched(group.classes_, X.shape[0], parts)

    # ---- the learned state as plain values --------------------------------------------------
    def export_state(self, *, copy: bool = True) -> KeyedState:
        """The learned state (see ``KeyedState``); NotFittedError before the model has learned.
        copy=False gives read-only views valid until it learns again."""
        group = self._group()
        arrays = self._keys.arrays()
        if copy:
            arrays = {name: array.copy() for name, array in arrays.items()}
        labels = self._keys.classes.labels
        return KeyedState(group.export_state(tables=False, copy=copy), float(self.prior_weight), self._keys.keys(),
                          labels.copy() if copy else labels, arrays)

    @classmethod
    def from_state(cls, state: KeyedState) -> KeyedNB:
        """The keyed model of this state; ValueError naming what does not fit (see ``ModelState``
        and ``KeyedCounts.from_arrays``)."""
        if state.group.kind not in KEYED_KINDS:
            raise ValueError(f"a keyed model is one of {list(KEYED_KINDS)}; the state's is {state.group.kind!r}")
        group = model_class(state.group.kind).from_state(state.group)
        keyed = cls(type(group)(**group.get_params()), prior_weight=state.prior_weight)
        keyed.check_params()
        kinds = {type(key) for key in state.keys}
        if len(kinds) > 1 or not kinds <= {str, int}:
            raise ValueError("the keys must be all strings or all integers")
        keyed.group_model_ = cast(FeatureCountsNB[Any], group)  # of a keyed kind: checked above
        keyed._keys = KeyedCounts.from_arrays(state.keys, state.classes, state.statistics, group.n_features_in_)
        if sum(keyed._keys.arrays()["examples"].tolist()) != group.n_examples_seen_:
            raise ValueError("the keys' examples do not add up to the group's")
        return keyed

    # ---- merging ----------------------------------------------------------------------------
    def merge(self, other: KeyedNB) -> Self:
        """Add another keyed model's keys and group (same family, parameters and prior_weight)."""
        if not isinstance(other, KeyedNB):
            raise TypeError(f"cannot merge a {type(other).__name__} into a KeyedNB.")
        if not math.isclose(float(other.prior_weight), float(self.prior_weight), rel_tol=0, abs_tol=0):
            raise ValueError(f"cannot merge keyed models of different prior_weight ({self.prior_weight} and "
                             f"{other.prior_weight}).")
        theirs = getattr(other, "group_model_", None)
        if theirs is None:
            return self
        if hasattr(self, "group_model_"):
            mine, their_type = self._keys.key_type(), other._keys.key_type()
            if mine is not None and their_type is not None and mine is not their_type:
                raise ValueError(f"cannot merge a keyed model of {their_type.__name__} keys into one of "
                                 f"{mine.__name__} keys.")
        else:
            self.group_model_ = type(theirs)(**theirs.get_params())
            self._keys = KeyedCounts(theirs.n_features_in_)
        self.group_model_.merge(theirs)
        self._keys.merge(other._keys)
        self._learned()
        return self


def _stitched(classes: AnyArray, n_rows: int, parts: list[tuple[Any, Explanations]]) -> Explanations:
    """The explanations of rows explained in groups: parts of (rows (n_part,), their explanations)."""
    width = max((part.features.shape[1] for _, part in parts), default=0)
    predicted, runner_up = np.zeros(n_rows, np.intp), np.zeros(n_rows, np.intp)
    log_odds, prior = np.zeros(n_rows), np.zeros(n_rows)
    features, contributions = np.full((n_rows, width), -1, np.int64), np.zeros((n_rows, width))
    for rows, part in parts:
        predicted[rows], runner_up[rows] = part.predicted, part.runner_up
        log_odds[rows], prior[rows] = part.log_odds, part.prior
        features[rows, :part.features.shape[1]] = part.features
        contributions[rows, :part.features.shape[1]] = part.contributions
    return Explanations(classes.copy(), predicted, runner_up, log_odds, prior, features, contributions)
