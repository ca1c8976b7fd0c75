"""The run loop of `worker serve`: read a batch -> predict -> emit -> learn -> maybe checkpoint.

Prequential evaluation: every message is predicted by the model as it was before the
batch, then the labeled ones are learned from. A message that cannot be used goes to the
dead-letter topic with its error, and nothing else happens to it.
"""

from __future__ import annotations

import logging
import time

import numpy as np
import orjson
import pyarrow as pa

from nbstream.features import FeatureError, FeatureSpec, RowProblems, label_values
from nbstream.validation import NotFittedError

from .checkpoint import CheckpointPolicy
from .messages import MessageFormat, decode
from .metrics_http import ServiceMetrics
from .sinks.kafka import KafkaSink
from .sources.kafka import KafkaSource
from .state import SnapshotStore

log = logging.getLogger(__name__)


class PrequentialLoop:
    def __init__(self, model, spec: FeatureSpec, fmt: MessageFormat, source: KafkaSource, sink: KafkaSink,
                 store: SnapshotStore, policy: CheckpointPolicy, metrics: ServiceMetrics, topic: str,
                 classes=None):
        self.model, self.spec, self.fmt = model, spec, fmt
        self.source, self.sink, self.store = source, sink, store
        self.policy, self.metrics, self.topic = policy, metrics, topic
        self.classes = None if classes is None else np.unique(np.asarray(classes))
        self.counts_only = getattr(model, "_counts_only", False)

    def run(self, should_stop, poll_timeout_ms: int = 500) -> None:
        """Poll and process until should_stop() is true, then write a final checkpoint."""
        while not should_stop():
            records = self.source.poll(poll_timeout_ms)
            self.metrics.heartbeat = time.monotonic()
            self.metrics.ready = bool(self.source.assigned)
            if records:
                self.process(records)
            if self.policy.record(len(records)):
                self.checkpoint()
        self.checkpoint()

    def process(self, records: list) -> None:
        decoded = decode([r.value for r in records], self.spec, self.fmt)
        X, problems = self.spec.extract(decoded.batch, learn=True, counts_only=self.counts_only,
                                        problems=decoded.problems)
        labeled, y = self._labels(decoded.batch.column("label"), problems)
        good = ~problems.bad
        for i in np.flatnonzero(problems.bad):
            self.sink.dead_letter(records[i], str(problems.message[i]), str(problems.column[i]))
        self.metrics.dead_letters.inc(int(problems.bad.sum()))
        self.metrics.messages.inc(len(records))
        if not good.any():
            return
        X_good = X[good] if not good.all() else X
        predicted, proba = self._predict(X_good)
        self._emit(records, decoded.ids, good, predicted, proba)
        learn = labeled[good]
        if learn.any():
            y_good = y[good][learn]
            if predicted is not None:
                self.metrics.judged(int((predicted[learn] == y_good).sum()), int(learn.sum()))
            first = getattr(self.model, "_classes", None) is None
            self.model.partial_fit(X_good[learn] if not learn.all() else X_good, y_good,
                                   classes=self.classes if first else None)
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
            problems.flag(labeled & ~np.isin(y, self.classes), "label",
                          f"label not among the classes {self.classes.tolist()}")
        return labeled, y

    def _predict(self, X):
        try:
            proba = self.model.predict_proba(X)
        except NotFittedError:
            return None, None
        return self.model.classes_[np.argmax(proba, axis=1)], proba

    def _emit(self, records, ids, good, predicted, proba) -> None:
        version = int(getattr(self.model, "n_examples_seen_", 0))
        labels = [str(c) for c in self.model.classes_.tolist()] if predicted is not None else []
        predictions = predicted.tolist() if predicted is not None else None
        for j, i in enumerate(np.flatnonzero(good)):
            record = records[i]
            value = {"id": ids[i], "prediction": None if predictions is None else predictions[j],
                     "probabilities": {} if proba is None else dict(zip(labels, proba[j].tolist())),
                     "model_version": version, "topic": record.topic, "partition": record.partition,
                     "offset": record.offset}
            self.sink.prediction(record.key, orjson.dumps(value))
        self.metrics.predictions.inc(len(predictions) if predictions is not None else int(good.sum()))

    def checkpoint(self) -> None:
        """Flush the producer, write the snapshot holding the offsets, then commit them."""
        self.sink.flush()
        if getattr(self.model, "_classes", None) is not None:
            offsets = {str(p.partition): o for p, o in self.source.positions.items() if p.topic == self.topic}
            meta = {"features": self.spec.to_json(),
                    "source": {"type": "kafka", "topic": self.topic, "offsets": offsets}}
            path = self.store.save(self.model, meta)
            self.source.commit()
            self.metrics.checkpoints.inc()
            self.metrics.last_checkpoint.set(time.time())
            log.info("checkpoint %s at offsets %s", path.name, offsets)
        self.policy.reset()
