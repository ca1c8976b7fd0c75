"""The model every replica predicts with: the base state merged with every partition's latest state.

Statistics are additive, so the merge is exact. The partitions this replica owns change at
every batch; the others when their owners commit (read back from the state topic). Without
forgetting, a batch is learned into the global model as it is into its partition's, and the
merge is redone only when another replica's state arrives. With forgetting (half_life) each
partition forgets at its own pace, so the merge is redone before the next prediction instead.

Category codes are learned per partition (in order of appearance there); the merge re-maps
them into one union encoder, as `worker merge` does for snapshots. When the group has one
state only (one partition, no base), the global model is that state's model itself: nothing
to merge, nothing to learn twice.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np

import nbstream
from nbstream.arrow import CategoricalEncoder, FeatureEncoder
from nbstream.base import NaiveBayes
from nbstream.labels import ClassSet

from ..io.messages import NUMBER, STRING
from .partition.record import PartitionState
from .telemetry.metrics import GLOBAL_MODEL_MERGE_SECONDS

log = logging.getLogger(__name__)


def merge_states(fresh: NaiveBayes, encoder: FeatureEncoder, states: Iterable[PartitionState],
                 on_conflict: Callable[[str], None] | None = None) -> tuple[NaiveBayes, FeatureEncoder]:
    """One model from many partition states (and the encoder its codes refer to).

    fresh : an unfitted model with the group's parameters, merged into
    encoder : the group's encoder; for categorical features a new union encoder is returned
    on_conflict : told about a state that cannot be merged (another kind of label), which is left out
    """
    union = encoder.spec.encoder() if isinstance(encoder, CategoricalEncoder) else encoder
    for state in states:
        if not state.model.is_fitted:
            continue
        try:
            fresh.merge(_recoded(state, union) if isinstance(union, CategoricalEncoder) else state.model)
        except (TypeError, ValueError) as error:
            (on_conflict or log.error)(f"a partition state left out of the merge: {error}")
    return fresh, union


def _recoded(state: PartitionState, union: CategoricalEncoder) -> nbstream.CategoricalNB:
    """A copy of a categorical state's model with its category codes those of ``union``."""
    model, encoder = state.model, state.encoder
    if not isinstance(model, nbstream.CategoricalNB) or not isinstance(encoder, CategoricalEncoder):
        raise TypeError(f"a state of a categorical group holds a {model!r}")
    return copy.deepcopy(model).recode_categories(union.align(encoder))


class GlobalModel:
    """fresh() : an unfitted model with the group's parameters; encoder : the group's encoder;
    classes : a fixed class set, or None for an open one."""

    def __init__(self, fresh: Callable[[], NaiveBayes], encoder: FeatureEncoder, classes=None):
        self._fresh = fresh
        self.encoder = encoder
        self.classes = classes
        self.model = fresh()
        self.incremental = self.model.half_life is None and self.model.window is None  # both move per partition
        self._stale = False
        self._alias = False  # the model is the only state's own

    @property
    def categorical(self) -> bool:
        return isinstance(self.encoder, CategoricalEncoder)

    @property
    def counts_only(self) -> bool:
        """Whether the model takes counts only (no negative feature values)."""
        return bool(self.model.requires_non_negative)

    @property
    def known_classes(self) -> np.ndarray | None:
        """(n_classes,) the classes learned so far, None before the first."""
        return self.model.classes_ if self.model.is_fitted else None

    @property
    def version(self) -> int:
        """The examples the model has learned: the version predictions carry."""
        return int(self.model.n_examples_seen_) if self.model.is_fitted else 0

    def label_kind(self) -> str | None:
        """The kind of label the group learns, once known."""
        labels = self.model.classes_ if self.model.is_fitted else (
            np.asarray(self.classes) if self.classes is not None else None)
        if labels is None:
            return None
        return STRING if labels.dtype.kind in "US" else NUMBER

    def rebuild(self, states: Iterable[PartitionState]) -> None:
        states = list(states)
        self._alias = len(states) == 1 and not self.categorical
        if self._alias:
            self.model = states[0].model
        else:
            with GLOBAL_MODEL_MERGE_SECONDS.time():
                self.model, self.encoder = merge_states(self._fresh(), self.encoder, states)
        self._stale = False

    def invalidate(self) -> None:
        """A state changed in a way the incremental update does not follow: rebuild before predicting."""
        self._stale = True

    @property
    def stale(self) -> bool:
        return self._stale

    @property
    def learns_apart(self) -> bool:
        """Whether a batch learned into a partition's state must be learned into this model too
        (not when this model is that state's own)."""
        return not self._alias

    def learn(self, X, y) -> None:
        """Learn a batch already learned into its partition's state (incremental mode only)."""
        if self._alias:
            return  # the partition's state learned it: it is this model
        if self.incremental and not self._stale:
            self.model.partial_fit(X, y, classes=self.classes if not self.model.is_fitted else None)
        else:
            self._stale = True

    def predict(self, X) -> Predictions:
        """The rows' predictions (all None while nothing is learned), each by this model."""
        versions = np.full(X.shape[0], self.version, dtype=np.int64)
        if not self.model.is_fitted:
            return Predictions(None, None, None, versions)
        proba = self.model.predict_proba(X)
        return Predictions(self.model.classes_, np.argmax(proba, axis=1), proba, versions)

    def predict_then_learn(self, X, y: np.ndarray, learned: np.ndarray, partitions: np.ndarray) -> Predictions:
        """Test-then-train predictions of a poll's rows: row i by this model plus the learned rows
        before i of its own partition, exactly (nothing is learned here: the caller learns next).

        X : (n_rows, n_features) encoded; y : (n_rows,) labels, read where learned;
        learned : (n_rows,) bool; partitions : (n_rows,) the input partition of each row.

        Categorical groups predict with this model alone: a category new to the group has no
        code in its encoder until the poll is learned, so the rows before it cannot teach it."""
        if not learned.any() or self.categorical:
            return self.predict(X)
        fitted = self.model.is_fitted
        classes = self._classes_after(y[learned])
        position = {label: i for i, label in enumerate(classes.tolist())}
        proba = np.zeros((X.shape[0], len(classes)))
        versions = np.empty(X.shape[0], dtype=np.int64)
        for partition in np.unique(partitions).tolist():
            rows = partitions == partition
            whole = bool(rows.all())
            scores = self.model.predict_proba_prequential(
                X if whole else X[rows], y if whole else y[rows], learn=learned if whole else learned[rows],
                classes=None if fitted else self.classes)
            columns = [position[label] for label in scores.classes.tolist()]
            proba[np.ix_(rows, columns)] = scores.proba
            proba[np.flatnonzero(rows)[~scores.scored]] = np.nan
            before = np.cumsum(learned[rows]) - learned[rows]
            versions[rows] = self.version + before
        best = np.argmax(np.nan_to_num(proba, nan=0.0), axis=1)
        return Predictions(classes, best, proba, versions)

    def _classes_after(self, labels: np.ndarray) -> np.ndarray:
        """(n_classes,) the classes the model has once it learned these labels (in this order)."""
        if self.model.is_fitted:
            classes = ClassSet(self.model.classes_.copy(), fixed=False)
        else:
            classes = ClassSet.open() if self.classes is None else ClassSet.fixed_from(self.classes)
        classes.index(labels)  # new labels join in order of first appearance, as learning adds them
        return classes.labels


@dataclass
class Predictions:
    """What the model says about a batch of rows; classes, best and proba None while it knows no class."""
    classes: np.ndarray | None  # (n_classes,) the class labels
    best: np.ndarray | None  # (n_rows,) index into classes of each row's most probable class
    proba: np.ndarray | None  # (n_rows, n_classes) float64; a row of NaN: predicted before any class was known
    versions: np.ndarray  # (n_rows,) the examples the model predicting each row had learned

    @property
    def scored(self) -> np.ndarray:
        """(n_rows,) whether each row has a prediction."""
        if self.proba is None or not self.proba.shape[1]:
            return np.zeros(len(self.versions), dtype=bool)
        return ~np.isnan(self.proba[:, 0])

    @property
    def labels(self) -> np.ndarray | None:
        """(n_rows,) the predicted class labels (meaningless where not scored)."""
        return None if self.classes is None or self.best is None else self.classes[self.best]
