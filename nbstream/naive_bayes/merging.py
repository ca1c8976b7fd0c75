"""Merging models, and a model's learned state as plain values: ``merge``,
``differing_params``, ``export_state`` and ``from_state``.

Statistics are a commutative monoid: models trained on parts of a stream merge into the model
trained on the whole. A state (``ModelState``) is what a snapshot stores and a merge reads.
"""

from __future__ import annotations

from typing import Any, Self

import numpy as np

from ..stats.held import Held
from ..utils.class_set import ClassSet
from .core import NaiveBayesCore, StatsT, same_param
from .state import (
    KEPT_FLOAT_DTYPES,
    ModelState,
    checked_feature_names,
    copied,
    each_array,
    is_natural,
    read_only,
    taken_over,
)
from .tables import TablesT, check_tables


class MergeableModel(NaiveBayesCore[StatsT, TablesT]):
    """The core with ``merge`` and the learned state as plain values."""

    def differing_params(self, other: MergeableModel[Any, Any]) -> list[str]:
        """Names of the parameters whose values differ from another model's of the same kind
        (those of ``layout_params`` aside: how the statistics are held changes no number)."""
        theirs = other.get_params()
        return [name for name, value in self.get_params().items()
                if name not in self.layout_params and not same_param(value, theirs.get(name))]

    def merge(self, other: MergeableModel[Any, Any]) -> Self:
        """Add another model's statistics into this one and return this one.

        Both must be the same kind, with the same parameters and feature count. Models
        trained on parts of a stream merge into the model trained on the whole; classes
        the other model knows and this (open) one does not are appended. With ``window``, the
        windows are united bucket by bucket from the newest: the merged model holds the
        examples of both windows.
        """
        if type(other) is not type(self):
            raise TypeError(f"cannot merge a {type(other).__name__} into a {type(self).__name__}.")
        differing = self.differing_params(other)
        if differing:
            raise ValueError(f"cannot merge models whose parameters differ: {differing}.")
        if not other.is_fitted:
            return self
        theirs = other.export_state(tables=False, copy=False)
        their_window = None if self.window is None else self._held_from(
            theirs.statistics, len(theirs.classes), theirs.n_features, theirs.examples_seen)
        if self.is_fitted:
            self._check_merge(theirs.n_features, their_window)
        else:
            self._start(ClassSet(theirs.classes.copy(), fixed=not theirs.open_classes), theirs.n_features,
                        theirs.feature_names, np.dtype(theirs.float_dtype))
        class_set = self._class_set()
        rows = class_set.rows_for(theirs.classes)
        held = self._held
        held.grow(len(class_set))
        window = held.sliding_window()
        if window is not None:
            theirs_held = None if their_window is None else their_window.sliding_window()
            assert theirs_held is not None  # made with this model's window
            window.merge(theirs_held, rows)
        else:
            self._merge_statistics(self._statistics_from(theirs.statistics), rows)
        self.n_examples_seen_ += theirs.examples_seen
        self._cache.invalidate()
        return self

    def _check_merge(self, n_features: int, their_window: Held[StatsT] | None) -> None:
        """Raise ValueError unless this fitted model can merge another's statistics: of n_features,
        and with ``window`` its window."""
        held = self._checked_held()
        if n_features != self.n_features_in_:
            raise ValueError(f"cannot merge: this model has {self.n_features_in_} features, the other {n_features}.")
        window, theirs = held.sliding_window(), None if their_window is None else their_window.sliding_window()
        if window is not None and theirs is not None:
            window.check_merge(theirs)

    # ---- the learned state as plain values ---------------------------------------------
    def export_state(self, *, tables: bool = True, copy: bool = True) -> ModelState:
        """The learned state (see ``ModelState``); NotFittedError before the model has learned.

        tables : include the smoothed tables (computed now if the statistics changed since)
        copy : give copies of the arrays; False gives the model's own, read-only, valid until
            it learns again (what a snapshot writer needs, without a copy)
        """
        class_set = self._class_set()
        held = self._checked_held()
        share = copied if copy else read_only
        names = getattr(self, "feature_names_in_", None)
        return ModelState(
            kind=self.kind, params=self.get_params(), classes=share(class_set.labels),
            open_classes=not class_set.fixed, n_features=self.n_features_in_,
            examples_seen=int(self.n_examples_seen_),
            statistics={name: share(array) for name, array in held.arrays().items()},
            tables={name: each_array(value, share) for name, value in self._fresh_tables().as_dict().items()}
            if tables else {},
            feature_names=None if names is None else share(names), float_dtype=self._float_dtype.name)

    @classmethod
    def from_state(cls, state: ModelState, *, copy: bool = True, keep_tables: bool = False) -> Self:
        """A model with this learned state: it predicts as the model that exported it, bit for
        bit, and can keep learning. Its smoothed tables are computed from the statistics (and
        kept when the state has tables, which must be the same).

        Everything is checked before anything is allocated from the state's numbers: a
        ValueError names what does not fit (another kind, an invalid parameter, classes that
        are not distinct labels, statistics of other names, shapes or values than training
        gives, a window of more buckets or examples than its parameters allow, tables that
        overflow, stored tables other than those the statistics give).

        copy : copy the arrays; False: the model takes them over (nothing else may change them)
        keep_tables : keep the tables computed here even when the state has none (a model about to
            predict wants them; one restored to learn or merge holds none)
        """
        if state.kind != cls.kind:
            raise ValueError(f"a state of kind {state.kind!r} cannot make a {cls.__name__}")
        model = cls()
        model.set_params(**state.params)
        model.check_params()
        class_set = ClassSet.restored(state.classes, fixed=not state.open_classes)
        n_features = state.n_features
        if not is_natural(n_features) or n_features < 1:
            raise ValueError(f"n_features must be a positive integer; got {n_features!r}")
        if not is_natural(state.examples_seen):
            raise ValueError(f"examples_seen must be a non-negative integer; got {state.examples_seen!r}")
        take = copied if copy else taken_over
        held = model._held_from({name: take(a) for name, a in state.statistics.items()}, len(class_set),
                                n_features, state.examples_seen)
        model._check_shapes(n_features, len(class_set) if class_set.fixed else None)
        model._start(class_set, n_features, checked_feature_names(state.feature_names, n_features),
                     model._checked_float_dtype(state.float_dtype), held)
        model.n_examples_seen_ = state.examples_seen
        tables = model._refresh_in_full()  # refuses parameters and statistics that overflow them
        if state.tables:
            check_tables(state.tables, tables.as_dict())
        if state.tables or keep_tables:
            model._cache.tables = tables
        # else they are computed again when first read: a model restored to learn or merge holds none
        return model

    def _checked_float_dtype(self, name: str) -> np.dtype[Any]:
        kept = KEPT_FLOAT_DTYPES if self._keeps_float_dtype else ("float64",)
        if name not in kept:
            raise ValueError(f"float_dtype must be one of {list(kept)} for a {type(self).__name__}; got {name!r}")
        return np.dtype(name)
