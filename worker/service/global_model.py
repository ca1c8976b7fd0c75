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
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import pyarrow as pa

import nbstream
from nbstream.arrow import CategoricalEncoder, FeatureEncoder
from nbstream.naive_bayes import NaiveBayes
from nbstream.utils.class_set import ClassSet
from nbstream.utils.ndarrays import AnyArray, Features

from ..io.json_predictions import KeyAnswers, ModelPredictions
from ..io.messages import NUMBER, STRING
from .explaining import Explaining
from .telemetry.metrics import GLOBAL_MODEL_MERGE_SECONDS

log = logging.getLogger(__name__)


class Statistics(Protocol):
    """A partition's statistics as the merge reads them: a Partition, or a record of one."""

    @property
    def model(self) -> NaiveBayes[Any, Any]: ...

    @property
    def encoder(self) -> FeatureEncoder | None:
        """Its own encoder where codes are learned per partition (categorical), else None."""


def merge_states(fresh: NaiveBayes[Any, Any], encoder: FeatureEncoder, states: Iterable[Statistics],
                 on_conflict: Callable[[str], None] | None = None) -> tuple[NaiveBayes[Any, Any], FeatureEncoder]:
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


def _recoded(state: Statistics, union: CategoricalEncoder) -> nbstream.CategoricalNB:
    """A copy of a categorical state's model with its category codes those of ``union``."""
    model, encoder = state.model, state.encoder
    if not isinstance(model, nbstream.CategoricalNB) or not isinstance(encoder, CategoricalEncoder):
        raise TypeError(f"a state of a categorical group holds a {model!r}")
    return copy.deepcopy(model).recode_categories(union.align(encoder))


class StatisticsSources(Protocol):
    """Where the global model's statistics come from (``GroupState``)."""

    def states(self) -> list[Statistics]:
        """Every state the merge takes: the base, the others' committed ones, the owned ones."""

    def version(self) -> Hashable:
        """Changes whenever ``states()`` would give other states, or one of them changed in a way
        that rows learned (``GlobalModel.learn``) do not follow."""


class GlobalModel:
    """The merge of ``sources``, kept current: before it predicts or says what it knows, it asks
    its sources whether anything changed since its last merge, and merges again if so.

    fresh() : an unfitted model with the group's parameters; encoder : the group's encoder;
    classes : a fixed class set, or None for an open one."""

    def __init__(self, fresh: Callable[[], NaiveBayes[Any, Any]], encoder: FeatureEncoder, sources: StatisticsSources,
                 classes: AnyArray | list[Any] | None = None):
        self._fresh, self._sources = fresh, sources
        self._encoder = encoder
        self._classes = classes
        self._model = fresh()
        self._incremental = self._model.half_life is None and self._model.window is None  # both move per partition
        self._merged_from: Hashable = None  # the sources' version the model was merged from
        self._behind = True  # rows were learned that the model did not follow: merge again
        self._alias = False  # the model is the only state's own

    # ---- what it is ---------------------------------------------------------------------------
    @property
    def model(self) -> NaiveBayes[Any, Any]:
        """The merged model, current."""
        self._catch_up()
        return self._model

    @property
    def encoder(self) -> FeatureEncoder:
        """The encoder the merged model's codes refer to, current."""
        self._catch_up()
        return self._encoder

    @property
    def group_encoder(self) -> FeatureEncoder:
        """The group's encoder without merging first: ``encoder`` itself but for categorical
        features, whose codes each partition learns (and the merge unites)."""
        return self._encoder

    @property
    def classes(self) -> AnyArray | list[Any] | None:
        """The fixed class set (None: open)."""
        return self._classes

    @property
    def categorical(self) -> bool:
        return isinstance(self._encoder, CategoricalEncoder)

    @property
    def counts_only(self) -> bool:
        """Whether the model takes counts only (no negative feature values)."""
        return bool(self._model.requires_non_negative)

    @property
    def known_classes(self) -> AnyArray | None:
        """(n_classes,) the classes learned so far, None before the first."""
        model = self.model
        return model.classes_ if model.is_fitted else None

    @property
    def version(self) -> int:
        """The examples the model has learned: the version predictions carry."""
        model = self.model
        return int(model.n_examples_seen_) if model.is_fitted else 0

    def label_kind(self) -> str | None:
        """The kind of label the group learns, once known."""
        model = self.model
        labels = model.classes_ if model.is_fitted else (
            np.asarray(self._classes) if self._classes is not None else None)
        if labels is None:
            return None
        return STRING if labels.dtype.kind in "US" else NUMBER

    def adopt_width(self, encoder: FeatureEncoder) -> None:
        """Take a list width another replica learned (an encoder of the same layout that knows it)."""
        self._encoder = encoder

    # ---- learning and predicting --------------------------------------------------------------
    def learn(self, X: object, y: AnyArray, batch: pa.RecordBatch | None = None) -> None:
        """Learn rows a partition just learned: incrementally where the model follows row by row
        (no forgetting, merged and current), else by merging again before it is next used.
        batch : the rows as Arrow (categorical codes are the group encoder's, so they are encoded here)."""
        if self._alias or self._behind or self._merged_from != self._sources.version():
            return  # the only state's own model learned it; or the next use merges anyway
        if not self._incremental:
            self._behind = True
            return
        if self.categorical:
            if batch is None:
                self._behind = True
                return
            X = self._encoder.encode(batch, learn=True)[0]
        self._model.partial_fit(X, y, classes=self._classes if not self._model.is_fitted else None)

    def predict(self, X: object) -> Predictions:
        """The rows' predictions (all None while nothing is learned), each by this model."""
        model = self.model
        versions = np.full(X.shape[0], self.version, dtype=np.int64)  # type: ignore[attr-defined]
        if not model.is_fitted:
            return Predictions(None, None, None, versions)
        proba = model.predict_proba(X)
        return Predictions(model.classes_, np.argmax(proba, axis=1), proba, versions)

    def predict_then_learn(self, X: Features, y: np.ndarray, learned: np.ndarray,
                           partitions: np.ndarray, explain: Explaining | None = None) -> Predictions:
        """``predictions_then_learn``'s predictions, each with its explanation when ``explain`` asks."""
        predictions = self._predict_then_learn(X, y, learned, partitions)
        if explain is not None:
            predictions.explanations = self._explain_then_learn(X, y, learned, partitions, explain)
        return predictions

    def _predict_then_learn(self, X: Features, y: np.ndarray, learned: np.ndarray,
                            partitions: np.ndarray) -> Predictions:
        """Test-then-train predictions of a poll's rows: row i by this model plus the learned rows
        before i of its own partition, exactly (nothing is learned here: the partitions learn next).

        X : (n_rows, n_features) encoded; y : (n_rows,) labels, read where learned;
        learned : (n_rows,) bool; partitions : (n_rows,) the input partition of each row.

        Categorical groups predict with this model alone: a category new to the group has no
        code in its encoder until the poll is learned, so the rows before it cannot teach it."""
        if not learned.any() or self.categorical:
            return self.predict(X)
        model = self.model
        fitted = model.is_fitted
        classes = self.classes_after(y[learned])
        position = {label: i for i, label in enumerate(classes.tolist())}
        proba = np.zeros((X.shape[0], len(classes)))
        versions = np.empty(X.shape[0], dtype=np.int64)
        for partition in np.unique(partitions).tolist():
            rows = partitions == partition
            whole = bool(rows.all())
            scores = model.predict_proba_prequential(
                X if whole else X[rows], y if whole else y[rows], learn=learned if whole else learned[rows],
                classes=None if fitted else self._classes)
            columns = [position[label] for label in scores.classes.tolist()]
            proba[np.ix_(rows, columns)] = scores.proba
            proba[np.flatnonzero(rows)[~scores.scored]] = np.nan
            before = np.cumsum(learned[rows]) - learned[rows]
            versions[rows] = self.version + before
        best = np.argmax(np.nan_to_num(proba, nan=0.0), axis=1)
        return Predictions(classes, best, proba, versions)

    def _explain_then_learn(self, X: Features, y: np.ndarray, learned: np.ndarray, partitions: np.ndarray,
                            explain: Explaining) -> list[bytes]:
        """Each row's explanation by the model that predicts it test-then-train: this model plus the
        learned rows before it of its own partition, exactly. A partition's rows are explained in
        runs that end at a learned row (explained, then learned, by a copy of this model): one run
        for a poll without labels, a run per labeled row otherwise."""
        model = self.model
        if not learned.any() or self.categorical:
            return explain.pieces(model, self._encoder, X, np.arange(X.shape[0]))
        pieces: list[bytes] = [b"[]"] * X.shape[0]
        for partition in np.unique(partitions).tolist():
            rows = np.flatnonzero(partitions == partition)
            learner = copy.deepcopy(model) if model.is_fitted else self._fresh()
            ends = [int(i) + 1 for i in np.flatnonzero(learned[rows])]
            for start, end in zip([0, *ends], [*ends, len(rows)], strict=True):
                run = rows[start:end]
                for row, piece in zip(run.tolist(), explain.pieces(learner, self._encoder, X, run), strict=True):
                    pieces[row] = piece
                if end in ends:
                    last = rows[end - 1:end]
                    learner.partial_fit(X[last], y[last],
                                        classes=None if learner.is_fitted else self._classes)
        return pieces

    def classes_after(self, labels: AnyArray) -> AnyArray:
        """(n_classes,) the classes the model has once it learned these labels (in this order)."""
        model = self.model
        if model.is_fitted:
            classes = ClassSet(model.classes_.copy(), fixed=False)
        else:
            classes = ClassSet.open() if self._classes is None else ClassSet.fixed_from(self._classes)
        classes.index(labels)  # new labels join in order of first appearance, as learning adds them
        return classes.labels

    def _catch_up(self) -> None:
        """Merge the sources again when they changed since the last merge (or rows were learned
        that the model did not follow)."""
        version = self._sources.version()
        if not self._behind and version == self._merged_from:
            return
        states = self._sources.states()
        self._alias = len(states) == 1 and not self.categorical
        if self._alias:
            self._model = states[0].model
        else:
            with GLOBAL_MODEL_MERGE_SECONDS.time():
                self._model, self._encoder = merge_states(self._fresh(), self._encoder, states)
        self._merged_from, self._behind = version, False


@dataclass
class Predictions:
    """What the model says about a batch of rows; classes, best and proba None while it knows no class."""
    classes: np.ndarray | None  # (n_classes,) the class labels
    best: np.ndarray | None  # (n_rows,) index into classes of each row's most probable class
    proba: np.ndarray | None  # (n_rows, n_classes) float64; a row of NaN: predicted before any class was known
    versions: np.ndarray  # (n_rows,) the examples the model predicting each row had learned
    explanations: list[bytes] | None = None  # (n_rows,) each row's JSON list of explaining features (--explain)
    keys: KeyAnswers | None = None  # (n_rows,) each row's key and its examples (--model-key)

    @property
    def scored(self) -> np.ndarray:
        """(n_rows,) whether each row has a prediction."""
        if self.proba is None or not self.proba.shape[1]:
            return np.zeros(len(self.versions), dtype=bool)
        scored: np.ndarray = ~np.isnan(self.proba[:, 0])
        return scored

    def take(self, rows: np.ndarray) -> Predictions:
        """The predictions of ``rows`` (n_rows,) bool (itself when it takes every row)."""
        if rows.all():
            return self
        explanations = None if self.explanations is None else \
            [piece for piece, taken in zip(self.explanations, rows.tolist(), strict=True) if taken]
        return Predictions(self.classes, None if self.best is None else self.best[rows],
                           None if self.proba is None else self.proba[rows], self.versions[rows], explanations,
                           None if self.keys is None else self.keys.take(rows))

    def written(self) -> ModelPredictions:
        """What a message format writes of them."""
        return ModelPredictions(self.classes, self.best, self.proba, self.versions, self.explanations, self.keys)

    @property
    def labels(self) -> np.ndarray | None:
        """(n_rows,) the predicted class labels (meaningless where not scored)."""
        return None if self.classes is None or self.best is None else self.classes[self.best]
