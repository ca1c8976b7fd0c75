"""The prequential loop of `worker serve`: decode -> predict -> emit -> learn, batch by batch.

Every message is predicted test-then-train: by the group's global model as it was before the
batch plus the labeled messages before it in its partition (computed for the whole batch at
once, exactly), then the labeled ones are learned into the state of the partition they came
from (and into the global model). A message that cannot be used goes to the reject sink (the dead-letter topic) with its
error, and nothing else happens to it; either way its offset is passed.

With a labels topic (``label_join.py``), a message with an id and no label is kept pending in its
partition's state once predicted, and learned when its label comes, judged by what it was served.

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
from ..io.fields import LABEL_COLUMN, MessageFields
from ..io.formats import MessageFormat
from ..io.interfaces import PredictionSink, RejectSink
from ..io.kafka.sink import Refusals
from ..io.messages import read_label_events
from ..io.records import Polled
from .global_model import Predictions
from .group_state import GroupState
from .partition.drift_watch import DriftWatch
from .partition.record import PartitionState
from .pending.join import LabelSettings, served, unmatched_letters, widened, with_id
from .pending.store import Joined
from .telemetry.counts import UncommittedCounts
from .telemetry.metrics import ServiceMetrics

log = logging.getLogger(__name__)
CLOCK_AHEAD_MS = 3_600_000  # how far past the wall clock a message's timestamp moves a partition's event time


class PrequentialLoop:
    """learn : learn from labeled messages (False: predict only, labels ignored).
    counts : where the work is counted until it is committed (the session publishes it then).
    refusals : what the broker refused (see KafkaSink); a poisoned input is dead-lettered.
    max_classes : a label that would grow an open class set beyond it is dead-lettered.
    drift : how each partition's prequential errors are watched for drift (None: not watched).
    labels : how labels that come later are joined (None: no labels topic); fields : the
        message fields (the names label events use)."""

    def __init__(self, messages: MessageFormat, group: GroupState, predictions: PredictionSink, rejects: RejectSink,
                 metrics: ServiceMetrics, *, learn: bool = True, refusals: Refusals | None = None,
                 max_classes: int = 1_000, counts: UncommittedCounts | None = None,
                 drift: DriftSettings | None = None, labels: LabelSettings | None = None,
                 fields: MessageFields | None = None):
        self.messages, self.group = messages, group
        self.labels, self.fields = labels, fields or MessageFields()
        self._clocks: dict[int, int] = {}  # partition -> the newest event time seen (ms), with a labels topic
        self.predictions, self.rejects, self.metrics = predictions, rejects, metrics
        self.counts = counts or UncommittedCounts()
        self.learn, self.max_classes = learn, max_classes
        self.drift = drift
        self._watches: dict[int, tuple[PartitionState, DriftWatch]] = {}
        self.refusals = refusals or Refusals()
        classes = group.global_model.classes
        self.classes = ClassSet.fixed_from(classes) if classes is not None and len(classes) else None

    def process(self, polled: Polled, labels: Polled | None = None) -> None:
        """Serve and learn a poll's messages, then join the labels topic's records of the same poll."""
        started = time.perf_counter()
        polled = self._owned(polled)
        labels = self._owned(labels) if labels is not None and self.labels is not None else None
        if self.labels is not None:
            self._expire(polled, labels)  # first: a label that comes past the TTL of its message is too late
        if len(polled):
            self._process(polled)
        if labels is not None and len(labels):
            self._join(labels)
        if self.labels is not None:
            self.metrics.pending.set(sum(len(s.pending) for s in self.group.owned.values() if s.pending is not None))
        self.metrics.batch_seconds.observe(time.perf_counter() - started)

    def _owned(self, polled: Polled) -> Polled:
        owned = np.isin(polled.partitions, list(self.group.owned))
        # A rebalance inside the poll that fetched them revoked their partitions (after this
        # replica committed them): their new owner reads them from the committed offset.
        return polled if owned.all() else polled.only(owned)

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
            if self.labels is not None:
                self._keep_pending(rows, decoded.ids, X, good & ~labeled, good, predictions)
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
            self._fit(state, X_rows, _rows_of(y, rows))
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

    def _fit(self, state: PartitionState, X, y: np.ndarray) -> None:
        """Learn rows into a partition's state (the global model learns them apart)."""
        model = self.group.global_model
        state.model.partial_fit(X, y, classes=model.classes if not state.model.is_fitted else None)

    # ---- labels that come later ---------------------------------------------------------------
    def _keep_pending(self, rows: Polled, ids: list, X, keep: np.ndarray, good: np.ndarray,
                      predictions: Predictions) -> None:
        """Keep the served rows in ``keep`` that have an id as pending in their partitions' states,
        with what each was served; those whose label came first join at once."""
        keep = keep & with_id(ids)
        if not keep.any():
            return
        scored = predictions.scored
        for partition in np.unique(rows.partitions[keep]).tolist():
            state = self.group.owned[partition]
            assert state.pending is not None  # the group keeps pending examples with a labels topic
            mine = keep & (rows.partitions == partition)
            best, proba = served(predictions.best, predictions.proba, scored, mine[good])
            added = state.pending.add([ids[i] for i in np.flatnonzero(mine).tolist()], _rows_of(X, mine), best,
                                      proba, rows.timestamps[mine], rows.offsets[mine])
            self.counts.labels["evicted"] += added.evicted
            self._learn_joined(partition, state, added.joined)
            state.changed = True

    def _join(self, labels: Polled) -> None:
        """Join a poll's label events to their partitions' pending examples; a bad event is a dead letter."""
        model = self.group.global_model
        events = read_label_events(labels.values, self.fields, model.label_kind())
        problems = RowProblems(len(labels))
        errors = np.array(events.errors, dtype=object)
        problems.flag(errors != None, "message", errors)  # noqa: E711 - elementwise
        given, y = self._labels(pa.array(events.labels), problems)
        self.rejects.reject(labels, problems)
        good = given & problems.good
        for partition in np.unique(labels.partitions).tolist():
            state = self.group.owned[partition]
            assert state.pending is not None
            mine = good & (labels.partitions == partition)
            if mine.any():
                met = state.pending.add_labels([events.ids[i] for i in np.flatnonzero(mine).tolist()], y[mine],
                                               labels.timestamps[mine], labels.offsets[mine])
                self.counts.labels["duplicate"] += met.duplicates
                self.counts.labels["unmatched"] += met.evicted
                self._learn_joined(partition, state, met.joined)
            following = int(labels.offsets[labels.partitions == partition].max()) + 1
            if state.labels_next_offset is None or following > state.labels_next_offset:
                state.labels_next_offset = following
            state.changed = True

    def _learn_joined(self, partition: int, state: PartitionState, joined: Joined) -> None:
        """Learn the examples that met their label, and judge what each was served (those served
        before the model knew a class are not judged)."""
        if not len(joined):
            return
        model = self.group.global_model
        if model.stale:
            model.rebuild(self.group.states())
        y = joined.labels
        self._fit(state, joined.X, y)
        if model.learns_apart:
            model.learn(joined.X, y)
        judged = joined.best >= 0
        classes = model.model.classes_ if model.model.is_fitted else None
        proba = None if classes is None or not judged.any() else widened(joined.proba[judged], len(classes))
        if proba is not None:
            assert classes is not None
            state.judge(y[judged], classes, proba)
            self._watch(partition, state, classes[joined.best[judged]] != y[judged])
        self.counts.labels["joined"] += len(joined)
        self.counts.label_delays.append(joined.delay_ms / 1000)
        self.counts.learned += len(joined)
        self.metrics.examples_seen.set(model.version)
        state.changed = True

    def _expire(self, polled: Polled, labels: Polled | None) -> None:
        """Move each partition's event-time clock to the newest timestamp of the poll (at most
        CLOCK_AHEAD_MS past the wall clock: one message stamped in the year 3000 must not expire
        every pending one), and drop what is older than the TTL by it; a waiting label dropped
        never met its message."""
        assert self.labels is not None
        moved = set()
        latest = int(time.time() * 1000) + CLOCK_AHEAD_MS
        for records in (polled, labels):
            if records is None or not len(records):
                continue
            for partition in np.unique(records.partitions).tolist():
                newest = min(int(records.timestamps[records.partitions == partition].max()), latest)
                if newest > self._clocks.get(partition, -1):
                    self._clocks[partition] = newest
                    moved.add(partition)
        for partition in sorted(moved):
            state = self.group.owned[partition]
            if state.pending is not None:
                expired = state.pending.expire(self._clocks[partition], self.labels.ttl_ms)
                if expired.examples or expired.labels:
                    self.counts.labels["expired"] += expired.examples
                    self.counts.labels["unmatched"] += expired.labels
                    if self.labels.dlq_unmatched and expired.unmatched is not None:
                        self.rejects.reject(*unmatched_letters(self.labels.topic, partition, expired.unmatched))
                    state.changed = True

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
