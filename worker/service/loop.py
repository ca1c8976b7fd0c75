"""The prequential loop of `worker serve`: decode -> predict -> emit -> learn, batch by batch.

Every message is predicted test-then-train: by the group's global model as it was before the
batch plus the labeled messages before it in its partition (computed for the whole batch at
once, exactly), then the labeled ones are learned into the state of the partition they came
from (and into the global model). A message that cannot be used goes to the reject sink (the dead-letter topic) with its
error, and nothing else happens to it; either way its offset is passed.

The loop sees its sinks only through their interfaces, so it runs in unit tests on fakes.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from nbstream.arrow import FeatureError, RowProblems, flag_classes_beyond, label_values
from nbstream.labels import ClassSet

from ..config import ServeConfig
from ..io.fields import LABEL_COLUMN
from ..io.formats import MessageFormat
from ..io.interfaces import PredictionSink, RejectSink
from ..io.kafka.sink import Refusals
from ..io.records import Polled
from .counts import UncommittedCounts
from .drift_watch import DriftWatch
from .global_model import Predictions
from .group_state import GroupState
from .observability import ServiceMetrics
from .partition_state import PartitionState

log = logging.getLogger(__name__)


class PrequentialLoop:
    """learn : learn from labeled messages (False: predict only, labels ignored).
    counts : where the work is counted until it is committed (the session publishes it then).
    refusals : what the broker refused (see KafkaSink); a poisoned input is dead-lettered.
    max_classes : a label that would grow an open class set beyond it is dead-lettered.
    drift : how each partition's prequential errors are watched for drift (None: not watched)."""

    def __init__(self, messages: MessageFormat, group: GroupState, predictions: PredictionSink, rejects: RejectSink,
                 metrics: ServiceMetrics, *, learn: bool = True, refusals: Refusals | None = None,
                 max_classes: int = 1_000, counts: UncommittedCounts | None = None,
                 drift: DriftSettings | None = None):
        self.messages, self.group = messages, group
        self.predictions, self.rejects, self.metrics = predictions, rejects, metrics
        self.counts = counts or UncommittedCounts()
        self.learn, self.max_classes = learn, max_classes
        self.drift = drift
        self._watches: dict[int, tuple[PartitionState, DriftWatch]] = {}
        self.refusals = refusals or Refusals()
        classes = group.global_model.classes
        self.classes = ClassSet.fixed_from(classes) if classes is not None and len(classes) else None

    def process(self, polled: Polled) -> None:
        started = time.perf_counter()
        owned = np.isin(polled.partitions, list(self.group.owned))
        if not owned.all():
            # A rebalance inside the poll that fetched them revoked their partitions (after this
            # replica committed them): their new owner reads them from the committed offset.
            polled = polled.only(owned)
        if len(polled):
            self._process(polled)
        self.metrics.batch_seconds.observe(time.perf_counter() - started)

    def _process(self, polled: Polled) -> None:
        model = self.group.global_model
        if model.stale:
            model.rebuild(self.group.states())
        decoded = self.messages.decode(polled.values, model.encoder.spec, model.label_kind() if self.learn else None)
        rows = decoded.rows_of(polled)  # one per example
        X, problems = model.encoder.encode(decoded.batch, learn=not model.categorical,
                                           counts_only=model.counts_only, problems=decoded.problems)
        labeled, y = self._labels(decoded.batch.column(LABEL_COLUMN), problems)
        self._flag_poisoned(rows, problems)
        self.rejects.reject(rows, problems)
        self.counts.messages += len(polled)
        good = problems.good
        if good.any():
            X_good, learn = problems.select_good(X), labeled & good
            predictions = model.predict_then_learn(X_good, y[good], learn[good], rows.partitions[good])
            self._emit(polled, rows, decoded, good, predictions)
            if self.learn:
                self._learn(rows, decoded.batch, X, y, learn, good, predictions)
        self._advance(polled)

    def _labels(self, labels: pa.Array, problems: RowProblems) -> tuple[np.ndarray, np.ndarray]:
        """(labeled mask, label values); a label outside a fixed class set is a problem."""
        if not self.learn:
            return np.zeros(len(labels), dtype=bool), np.zeros(len(labels))
        try:
            labeled, y = label_values(labels, "label", problems)
        except FeatureError as error:
            problems.flag(np.ones(len(labels), dtype=bool), "label", str(error))
            return np.zeros(len(labels), dtype=bool), np.zeros(len(labels))
        if self.classes is not None:
            problems.flag(labeled & ~self.classes.known(y), "label",
                          f"label not among the classes {self.classes.labels.tolist()}")
        else:
            flag_classes_beyond(y, self.group.global_model.known_classes, self.max_classes, "label", problems,
                                f"label would add a class beyond --max-classes {self.max_classes}", labeled)
        return labeled, y

    def _flag_poisoned(self, polled: Polled, problems: RowProblems) -> None:
        poisoned = self.refusals.poisoned
        if not poisoned:
            return
        errors = [poisoned.get((polled.topic, p, o))
                  for p, o in zip(polled.partitions.tolist(), polled.offsets.tolist(), strict=True)]
        if any(errors):
            problems.flag(np.array([e is not None for e in errors]), "output", np.array(errors, dtype=object))

    def _emit(self, polled: Polled, rows: Polled, decoded, good: np.ndarray, predictions: Predictions) -> None:
        """Predictions of the good rows, in the message format."""
        keyed_like, values = self.messages.encode(polled, decoded, good, predictions.classes, predictions.best,
                                                  predictions.proba, predictions.versions)
        diverted = self.predictions.send_predictions(polled, keyed_like, values)
        self.counts.predictions += int(good.sum())
        if diverted:  # too large for the output topic: dead letters instead
            per_message = np.bincount(decoded.message_index()[good], minlength=len(polled))
            self.counts.predictions -= int(per_message[[keyed_like[j] for j in diverted]].sum())
        stamps = rows.timestamps[good]
        self.metrics.end_to_end.observe_many(time.time() - stamps[stamps > 0] / 1000)
        scored, partitions = predictions.scored, rows.partitions[good]
        for partition in np.unique(partitions[scored]).tolist():
            state = self.group.owned.get(partition)
            if state is not None and predictions.classes is not None and predictions.best is not None:
                state.served(predictions.classes, predictions.best[scored & (partitions == partition)])

    def _learn(self, polled: Polled, batch: pa.RecordBatch, X, y, learn: np.ndarray, good: np.ndarray,
               predictions: Predictions) -> None:
        """Learn the rows in ``learn`` into their partitions' states and the global model, judging
        each against its prediction first (those predicted before the model knew a class are not)."""
        if not learn.any():
            return
        model = self.group.global_model
        partitions = polled.partitions
        right, judged = np.zeros(len(polled), dtype=bool), np.zeros(len(polled), dtype=bool)
        predicted = predictions.labels
        if predicted is not None:
            guessed = np.empty(len(polled), dtype=predicted.dtype)
            guessed[good] = predicted
            judged[good] = predictions.scored
            judged &= learn
            right[judged] = guessed[judged] == y[judged]
        for partition in np.unique(partitions[learn]):
            rows = learn & (partitions == partition)
            state = self.group.owned[int(partition)]
            if state.encoder is not None:  # categorical: codes of the partition's own
                X_rows = state.encoder.encode(batch.filter(pa.array(rows)), learn=True)[0]
            else:
                X_rows = _rows_of(X, rows)
            state.model.partial_fit(X_rows, _rows_of(y, rows),
                                    classes=model.classes if not state.model.is_fitted else None)
            if judged[rows].any():
                assert predictions.classes is not None and predictions.proba is not None  # judged rows were scored
                state.judge(y[rows & judged], predictions.classes, predictions.proba[(rows & judged)[good]])
                self._watch(int(partition), state, ~right[rows & judged])
            state.changed = True
        if model.learns_apart:
            X_learn = model.encoder.encode(batch.filter(pa.array(learn)), learn=True)[0] if model.categorical \
                else _rows_of(X, learn)
            model.learn(X_learn, _rows_of(y, learn))
        self.counts.learned += int(learn.sum())
        self.metrics.examples_seen.set(model.version)

    def _watch(self, partition: int, state: PartitionState, errors: np.ndarray) -> None:
        """Feed a partition's drift watch its newly judged errors ((n,) bool, in stream order);
        on a detection with reset-to-window, keep only the partition's examples since the change."""
        if self.drift is None:
            return
        kept = self._watches.get(partition)
        watch = kept[1] if kept is not None and kept[0] is state else self._restored_watch(partition, state)
        self._watches[partition] = (state, watch)
        detections = watch.observe(errors)
        state.drift = watch.to_json()
        if detections and self.drift.reset_to_window:
            state.model.keep_newest(watch.examples_since_change or 0)
            self.group.global_model.invalidate()

    def _restored_watch(self, partition: int, state: PartitionState) -> DriftWatch:
        """The partition's watch as its state left it (a new one when it has none, or one that
        does not read: a warning, and the partition's state goes on)."""
        assert self.drift is not None
        if state.drift is None:
            return DriftWatch(self.drift.detector, partition)
        try:
            return DriftWatch.from_json(state.drift, self.drift.detector, partition)
        except ValueError as error:
            log.warning("a partition's drift watch could not be restored from its state: a new one starts",
                        extra={"partition": partition, "problem": str(error)[:300]})
            return DriftWatch(self.drift.detector, partition)

    def _advance(self, polled: Polled) -> None:
        """Every message's offset is passed, whatever became of it."""
        for partition in np.unique(polled.partitions).tolist():
            state = self.group.owned.get(partition)
            following = int(polled.offsets[polled.partitions == partition].max()) + 1
            if state is not None and (state.next_offset is None or following > state.next_offset):
                state.next_offset = following
                state.changed = True


@dataclass(frozen=True)
class DriftSettings:
    """detector : "adwin" or "page-hinkley"; reset_to_window : on a detection, keep only the
    partition's examples since the change (windowed models)."""
    detector: str
    reset_to_window: bool = False


def drift_settings(config: ServeConfig) -> DriftSettings | None:
    """What a ServeConfig asks of drift (None: --drift-detector none)."""
    if config.drift_detector == "none":
        return None
    return DriftSettings(config.drift_detector, reset_to_window=config.on_drift == "reset-to-window")


def _rows_of(values, rows: np.ndarray):
    """values[rows] for a boolean mask, without copying when every row is kept."""
    return values if rows.all() else values[rows]
