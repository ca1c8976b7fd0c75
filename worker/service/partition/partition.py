"""One input partition this replica owns, and every step a poll takes in it.

The loop routes a poll's rows to their partitions; a ``Partition`` does each step for its own
rows, in this order (docs/service.md):

  1. clock  : its event-time clock moves to the newest timestamp the poll brought it (of messages
              or labels), at most ``CLOCK_AHEAD_MS`` past the wall clock: one message stamped in
              the year 3000 must not expire every pending one
  2. expire : pending examples and waiting labels older than the label TTL by that clock go
  3. served : every prediction served counts in its quality's predicted-class distribution
  4. learn  : labeled messages are learned, each judged by what it was served, and the judged
              errors watched for drift
  5. keep   : served messages with an id and no label wait for their label (those already older
              than the TTL by the clock are expired at once); a label that came first joins
  6. join   : label events meet their pending examples, which are then learned and judged
  7. advance: the next offsets on the input and on the labels topic

A partition holds one model per name the group learns (the served model and its challengers,
``worker/service/models``), each with its own statistics and quality: every one learns the same
rows, and each is judged by what it predicted. It learns into its own statistics and tells the
group's model of each name (``SharedModel``) the rows it learned; it marks itself changed whenever
a step changes what its state record holds, and ``snapshot()`` gives that record (and clears the
mark). ``revision`` grows when its statistics change in a way the group's models cannot follow
row by row (a drift reset). The drift watch watches the errors of the served model.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import pyarrow as pa

from nbstream.arrow import FeatureEncoder
from nbstream.metrics.quality import PredictionQuality
from nbstream.naive_bayes import NaiveBayes
from nbstream.utils.ndarrays import AnyArray, BoolArray, FloatArray, IndexArray, IntArray

from ..keys.records import PartitionKeys
from ..pending.join import LabelsConfig, widened
from ..pending.records import PendingRecords, PendingWrite
from ..pending.store import Added, Expired, Joined, Labeled, PendingExamples, Served
from .drift_watch import Detection, DriftConfig, DriftWatch
from .record import ModelState, ModelStatistics, PartitionRecord

CLOCK_AHEAD_MS = 3_600_000  # how far past the wall clock a message's timestamp moves a partition's event time


class SharedModel(Protocol):
    """What a partition needs of the model every replica predicts with (``GlobalModel``)."""

    @property
    def classes(self) -> AnyArray | list[Any] | None:
        """A fixed class set (None: open), given to a partition's first ``partial_fit``."""

    @property
    def known_classes(self) -> AnyArray | None:
        """(n_classes,) the classes it knows now, None before the first."""

    def learn(self, X: object, y: AnyArray, batch: pa.RecordBatch | None = None) -> None:
        """Learn rows a partition just learned (``batch``: their Arrow rows, for models whose
        codes the group's encoder gives; None for rows that have none, pending examples)."""


class SharedModels(Protocol):
    """The group's model of each name (``GlobalModels``), and the one that serves."""

    @property
    def served(self) -> str:
        """The name of the model whose predictions are sent."""

    def __getitem__(self, name: str) -> SharedModel: ...


@dataclass(frozen=True)
class Judged:
    """Labeled rows' served predictions: classes (C,) the labels of proba's columns, proba (k, C)
    of the k judged rows among those learned, judged (n,) which of the n learned rows they are."""
    classes: AnyArray
    proba: FloatArray
    judged: BoolArray


class Referee(Protocol):
    """Told of the judgements of every model's predictions of examples whose label came later
    (``PromotionWatch``; the loop judges those learned with their label itself)."""

    def judged(self, y: AnyArray, judged: dict[str, Judged]) -> None:
        """y : (n,) the labels of rows learned in stream order; judged : each model's predictions
        judged among them, by name."""


@dataclass(frozen=True)
class Kept:
    """What ``keep_pending`` did: the store's outcome (None when nothing was added), and how many
    rows came already older than the TTL (expired at once, never kept)."""
    added: Added | None
    expired: int


class Partition:
    """number : the input partition; record : its state as last committed (or new), holding a
    model of each name of ``shared``; shared : the group's models; drift : how its errors are
    watched (None: not watched); labels : labels that come later (None: no labels topic);
    referee : told of the judgements of examples whose label came later (None: nobody)."""

    def __init__(self, number: int, record: PartitionRecord, shared: SharedModels, *,
                 drift: DriftConfig | None = None, labels: LabelsConfig | None = None, referee: Referee | None = None):
        self.number = number
        self._shared, self._drift, self._referee = shared, drift, referee
        self._ttl_ms = None if labels is None else labels.ttl_ms
        self._first, self._encoder = record.name, record.encoder
        self._models = {record.name: record.model, **{name: state.model for name, state in record.others.items()}}
        self._qualities = {record.name: record.quality,
                           **{name: state.quality for name, state in record.others.items()}}
        self._next_offset, self._labels_next_offset = record.next_offset, record.labels_next_offset
        self._label_field, self._drift_json = record.label_field, record.drift
        self._pending, self._pending_records = record.pending, record.pending_records
        self._keys = record.keys
        self._watch: DriftWatch | None = None  # restored from _drift_json when first needed
        self._clock = -1  # the newest event time seen (ms), with a labels topic
        self._changed = False
        self._pending_changes = self._pending.changes if self._pending is not None else 0  # as last written
        self.revision = 0

    # ---- what it holds ----------------------------------------------------------------------
    @property
    def model(self) -> NaiveBayes[Any, Any]:
        """Its first model's statistics (the model the serve options describe): learned from this partition only."""
        return self._models[self._first]

    def statistics(self, name: str) -> ModelStatistics | None:
        """The statistics of its model ``name`` (None: it holds none of that name)."""
        model = self._models.get(name)
        return None if model is None else ModelStatistics(model, self._encoder)

    @property
    def encoder(self) -> FeatureEncoder | None:
        """Its own feature encoder where codes are learned per partition (categorical), else None."""
        return self._encoder

    @property
    def quality(self) -> PredictionQuality:
        """How its first model's predictions fared."""
        return self._qualities[self._first]

    @property
    def qualities(self) -> dict[str, PredictionQuality]:
        """How each model's predictions fared, by name."""
        return dict(self._qualities)

    @property
    def next_offset(self) -> int | None:
        """The next input offset to process (None: nothing processed yet)."""
        return self._next_offset

    @property
    def labels_next_offset(self) -> int | None:
        """The next offset of its partition of the labels topic (None: none read yet)."""
        return self._labels_next_offset

    @property
    def pending_examples(self) -> int:
        """Messages waiting for their label."""
        return 0 if self._pending is None else len(self._pending)

    @property
    def pending(self) -> PendingExamples | None:
        """Its pending examples (delayed labels), None when the service keeps none."""
        return self._pending

    @property
    def keys(self) -> PartitionKeys | None:
        """Its keys' own counts (None: the group keeps no model per key); they learn as the loop
        predicts them (``keys/serving.py``)."""
        return self._keys

    @property
    def changed(self) -> bool:
        """Whether a step (or its pending store, or a key) changed its state record since the last ``snapshot()``."""
        return self._changed or (self._pending is not None and self._pending.changes != self._pending_changes) \
            or (self._keys is not None and bool(self._keys.changed or self._keys.dropped))

    # ---- the steps of a poll ----------------------------------------------------------------
    def move_clock(self, newest_ms: int) -> Expired | None:
        """Steps 1 and 2: move the event-time clock to ``newest_ms`` (clamped), and when it moved,
        drop what the TTL expires by it; what was dropped (None: nothing)."""
        newest = min(newest_ms, int(time.time() * 1000) + CLOCK_AHEAD_MS)
        if newest <= self._clock:
            return None
        self._clock = newest
        if self._pending is None or self._ttl_ms is None:
            return None
        expired = self._pending.expire(self._clock, self._ttl_ms)
        if not (expired.examples or expired.labels):
            return None
        self._changed = True
        return expired

    def served(self, name: str, classes: AnyArray, best: IndexArray) -> None:
        """Step 3: count the predictions model ``name`` made, labeled or not, in stream order:
        classes (C,) labels, best (n,) the column of classes each prediction chose."""
        self._qualities[name].predicted(classes, best)

    def learn(self, X: object, y: AnyArray, batch: pa.RecordBatch | None,
              judged: dict[str, Judged] | None = None) -> list[Detection]:
        """Step 4: every model learns labeled rows (X (n, d) as the group's encoder gave them, y (n,),
        batch their Arrow rows: a partition with codes of its own encodes them itself), each judged
        by what it predicted for those ``judged`` names (by name); the drift detections among them."""
        own_codes = self._encoder is not None and batch is not None
        X_own = self._encoder.encode(batch, learn=True)[0] if own_codes else X  # type: ignore[union-attr]
        for name in self._models:
            self._fit(name, X_own, y)
            self._shared[name].learn(X, y, batch)
        self._changed = True
        return self._judge(y, judged or {}, refer=False)  # the loop judged them for promotion already

    def keep_pending(self, ids: list[Any], X: object, served: dict[str, Served], times_ms: IntArray,
                     offsets: IntArray) -> Kept:
        """Step 5: keep served messages until their label comes: ids (n,), X (n, d), what each model
        predicted for each (by name: best (n,) int32, -1: no class known; proba (n, C)), their event
        times and offsets. A row already older than the TTL by the clock is not kept (counted as
        expired); a label that came first joins its row at once (learned and judged as in
        ``join_labels``)."""
        assert self._pending is not None and self._ttl_ms is not None, "a partition keeps pending examples " \
                                                                        "only with a labels topic"
        fresh = times_ms >= self._clock - self._ttl_ms
        expired = len(ids) - int(fresh.sum())
        if not fresh.any():
            return Kept(None, expired)
        if not fresh.all():
            ids = [key for key, keep in zip(ids, fresh.tolist(), strict=True) if keep]
            X = X[fresh]  # type: ignore[index]
            served = {name: (best[fresh], proba[fresh]) for name, (best, proba) in served.items()}
            times_ms, offsets = times_ms[fresh], offsets[fresh]
        best, proba = served[self._first]
        others = {name: predicted for name, predicted in served.items() if name != self._first}
        added = self._pending.add(ids, X, best, proba, times_ms, offsets, others)
        self._learn_joined(added.joined)
        self._changed = True
        return Kept(added, expired)

    def join_labels(self, ids: list[Any], labels: AnyArray, times_ms: IntArray, offsets: IntArray) -> Labeled:
        """Step 6: label events (ids (n,), labels (n,), their times and offsets on the labels topic)
        meet their pending examples, which are learned and judged by what they were served; the
        others wait for their message."""
        assert self._pending is not None, "a partition joins labels only with a labels topic"
        met = self._pending.add_labels(ids, labels, times_ms, offsets)
        self._learn_joined(met.joined)
        self._changed = True
        return met

    def advance(self, next_offset: int) -> None:
        """Step 7: every message before ``next_offset`` was processed (whatever became of it)."""
        if self._next_offset is None or next_offset > self._next_offset:
            self._next_offset = next_offset
            self._changed = True

    def advance_labels(self, next_offset: int) -> None:
        """Step 7 on the labels topic: every label event before ``next_offset`` was read."""
        if self._labels_next_offset is None or next_offset > self._labels_next_offset:
            self._labels_next_offset = next_offset
        self._changed = True

    # ---- its state record ---------------------------------------------------------------------
    def snapshot(self, name: str) -> tuple[PartitionRecord, PendingWrite]:
        """Its state record as it stands, and the records of its pending examples to write with it
        (those made since the last snapshot first, tombstones after; none when it keeps none);
        ``name`` is its state's name in the state topic. Clears ``changed``: its keys' records are
        to be taken first (``key_records``)."""
        records, write = self._pending_records, PendingWrite()
        if self._pending is not None and records is None:
            records = PendingRecords()
        if records is not None:
            write = records.write(name, self._pending)
        self._pending_records = records if self._pending is not None else None  # tombstoned: nothing left
        self._changed = False
        self._pending_changes = self._pending.changes if self._pending is not None else 0
        return self.record(), write

    def key_records(self, name: str) -> list[tuple[bytes, bytes | None]]:
        """The records of its keys changed since they were last taken, for the keys topic (none when it
        keeps no key); ``name`` is its state's name."""
        return [] if self._keys is None else self._keys.write(name, self._next_offset or 0)

    def record(self) -> PartitionRecord:
        """Its state record as it stands (the same objects: it goes on learning into them)."""
        drift = self._watch.to_json() if self._watch is not None else self._drift_json
        others = {name: ModelState(model, self._qualities[name]) for name, model in self._models.items()
                  if name != self._first}
        return PartitionRecord(self.model, self._encoder, self._next_offset, self.quality,
                               label_field=self._label_field, drift=drift, pending=self._pending,
                               pending_records=self._pending_records, labels_next_offset=self._labels_next_offset,
                               name=self._first, others=others, keys=self._keys)

    # ---- inside the steps -------------------------------------------------------------------
    def _fit(self, name: str, X: object, y: AnyArray) -> None:
        model = self._models[name]
        model.partial_fit(X, y, classes=None if model.is_fitted else self._shared[name].classes)

    def _judge(self, y: AnyArray, judged: dict[str, Judged], refer: bool = True) -> list[Detection]:
        """Judge each model's predictions of learned rows (y (n,)) by their labels, tell the
        referee (when ``refer``), and watch the served model's errors; the drift detections among them."""
        judged = {name: judgement for name, judgement in judged.items() if judgement.judged.any()}
        if not judged:
            return []
        for name, judgement in judged.items():
            self._qualities[name].judge(y[judgement.judged], judgement.classes, judgement.proba)
        if refer and self._referee is not None:
            self._referee.judged(y, judged)
        served = judged.get(self._shared.served)
        if served is None:
            return []
        return self._observe(served.classes[np.argmax(served.proba, axis=1)] != y[served.judged])

    def _learn_joined(self, joined: Joined) -> None:
        """Every model learns examples that met their label, each judged by what it predicted for
        them (not those predicted before the model knew a class, nor those predicted by a model
        that knew more classes than the group's does here yet)."""
        if not len(joined):
            return
        y = joined.labels
        for name in self._models:
            self._fit(name, joined.X, y)
            self._shared[name].learn(joined.X, y)
        judged = {}
        for name, (best, proba) in {self._first: (joined.best, joined.proba), **joined.others}.items():
            classes = self._shared[name].known_classes if name in self._models else None
            rows = best >= 0
            widened_proba = None if classes is None or not rows.any() else widened(proba[rows], len(classes))
            if widened_proba is not None and classes is not None:
                judged[name] = Judged(classes, widened_proba, rows)
        self._judge(y, judged)

    def _observe(self, errors: BoolArray) -> list[Detection]:
        """Feed the drift watch newly judged errors ((k,) bool, stream order); with reset-to-window,
        keep only the examples since a change it detects (in each model that keeps a window)."""
        if self._drift is None:
            return []
        watch = self._watch = self._watch or self._restored_watch()
        detections = watch.observe(errors)
        if detections and self._drift.reset_to_window:
            for model in self._models.values():
                if model.window is not None:
                    model.keep_newest(watch.examples_since_change or 0)
            self.revision += 1
        return detections

    def _restored_watch(self) -> DriftWatch:
        """The watch as its state left it (a new one when it has none, or one that does not read)."""
        assert self._drift is not None
        return DriftWatch.restored(self._drift_json, self._drift.detector, self.number)

