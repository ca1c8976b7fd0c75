"""The run loop of `worker serve`: read a batch -> predict -> emit -> learn -> maybe checkpoint.

Prequential evaluation: every message is predicted by the model as it was before the
batch, then the labeled ones are learned from. A message that cannot be used goes to the
reject sink (the dead-letter topic) with its error, and nothing else happens to it.

The loop sees its source, sinks and checkpointer only through their interfaces, so it runs
in unit tests on in-memory fakes.
"""

from __future__ import annotations

import time

import numpy as np
import orjson
import pyarrow as pa

from nbstream.arrow import FeatureEncoder, FeatureError, RowProblems, label_values
from nbstream.labels import ClassSet

from ..checkpoint import Checkpointer
from ..config import MessageFields
from ..io.interfaces import PredictionSink, RecordSource, RejectSink
from ..io.messages import decode
from .observability import ServiceMetrics


class PrequentialLoop:
    """classes: a fixed class set (labels outside it are rejected), or None for an open one."""

    def __init__(self, model, features: FeatureEncoder, fields: MessageFields, source: RecordSource,
                 predictions: PredictionSink, rejects: RejectSink, checkpointer: Checkpointer,
                 metrics: ServiceMetrics, classes=None):
        self.model, self.features, self.fields = model, features, fields
        self.source, self.predictions, self.rejects = source, predictions, rejects
        self.checkpointer, self.metrics = checkpointer, metrics
        self.classes = ClassSet.fixed_from(classes) if classes is not None and len(classes) else None

    def run(self, should_stop, poll_timeout_ms: int = 500) -> None:
        """Poll and process until should_stop() is true, then write a final checkpoint."""
        while not should_stop():
            records = self.source.poll(poll_timeout_ms)
            self.metrics.heartbeat = time.monotonic()
            self.metrics.ready = bool(self.source.assigned)
            if records:
                self.process(records)
            if self.checkpointer.record(len(records)):
                self._checkpointed()
        if self.checkpointer.commit():
            self._checkpointed()

    def process(self, records: list) -> None:
        decoded = decode([r.value for r in records], self.features.spec, self.fields)
        X, problems = self.features.encode(decoded.batch, learn=True, counts_only=self.model.requires_non_negative,
                                           problems=decoded.problems)
        labeled, y = self._labels(decoded.batch.column("label"), problems)
        self.rejects.reject(records, problems)
        self.metrics.dead_letters.inc(int(problems.bad.sum()))
        self.metrics.messages.inc(len(records))
        good = problems.good
        if not good.any():
            return
        X_good = problems.select_good(X)
        predicted, proba = self._predict(X_good)
        self._emit(records, decoded.ids, good, predicted, proba)
        learn = labeled[good]
        if learn.any():
            y_good = problems.select_good(y)[learn]
            if predicted is not None:
                self.metrics.judged(int((predicted[learn] == y_good).sum()), int(learn.sum()))
            first = not self.model.is_fitted
            self.model.partial_fit(X_good[learn] if not learn.all() else X_good, y_good,
                                   classes=self.classes.labels if first and self.classes else None)
            self.metrics.learned.inc(int(learn.sum()))
            self.metrics.examples_seen.set(self.model.n_examples_seen_)

    def _labels(self, labels: pa.Array, problems: RowProblems) -> tuple[np.ndarray, np.ndarray]:
        """(labeled mask, label values); a label outside a fixed class set is a problem."""
        try:
            labeled, y = label_values(labels, "label", problems)
        except FeatureError as error:
            problems.flag(np.ones(len(labels), dtype=bool), "label", str(error))
            return np.zeros(len(labels), dtype=bool), np.zeros(len(labels))
        if self.classes is not None:
            problems.flag(labeled & ~self.classes.known(y), "label",
                          f"label not among the classes {self.classes.labels.tolist()}")
        return labeled, y

    def _predict(self, X):
        if not self.model.is_fitted:
            return None, None
        proba = self.model.predict_proba(X)
        return self.model.classes_[np.argmax(proba, axis=1)], proba

    def _emit(self, records, ids, good, predicted, proba) -> None:
        version = int(self.model.n_examples_seen_) if self.model.is_fitted else 0
        labels = [str(c) for c in self.model.classes_.tolist()] if predicted is not None else []
        predictions = predicted.tolist() if predicted is not None else None
        for j, i in enumerate(np.flatnonzero(good)):
            record = records[i]
            value = {"id": ids[i], "prediction": None if predictions is None else predictions[j],
                     "probabilities": {} if proba is None else dict(zip(labels, proba[j].tolist())),
                     "model_version": version, "topic": record.topic, "partition": record.partition,
                     "offset": record.offset}
            self.predictions.prediction(record.key, orjson.dumps(value))
        self.metrics.predictions.inc(int(good.sum()))

    def _checkpointed(self) -> None:
        self.metrics.checkpoints.inc()
        self.metrics.last_checkpoint.set(time.time())
