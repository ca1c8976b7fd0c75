"""The format that reads messages and writes their predictions (JSON, one example per message;
Arrow IPC, many per message; Avro records of a Schema Registry, one per message, answered in JSON).

The service is handed one ``MessageFormat`` and never asks which one it is.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np

from nbstream.arrow import FeatureSpec
from nbstream.utils.ndarrays import AnyArray, BoolArray, FloatArray, IndexArray, IntArray

from .arrow_messages import decode_arrow, encode_predictions
from .fields import REGISTRY_FORMATS, MessageFields
from .json_predictions import ModelPredictions, ServedBy, named_prediction_values, prediction_values
from .messages import Decoded as Decoded
from .messages import decode, decode_objects, decode_table, decode_vectors
from .records import FieldValue, Polled
from .registry.records import RegistryRecords


class MessageFormat(Protocol):
    def decode(self, values: Sequence[bytes | None], spec: FeatureSpec, label_kind: str | None) -> Decoded:
        """The examples of a poll's message values; label_kind : the kind of label the model learns
        (a label of another kind is a problem), None to read labels of any kind. May raise
        RegistryUnavailable (a format whose schemas a registry holds): nothing of the poll was used,
        and the same poll decodes once the registry answers."""

    def encode(self, polled: Polled, decoded: Decoded, good: BoolArray, predictions: ModelPredictions,
               served_by: ServedBy | None = None) -> tuple[list[int], list[bytes]]:
        """The predictions of the good rows as (message index to key each by, value).

        good : (n_rows,) bool; predictions : of the good rows (``ModelPredictions``): classes
        (n_classes,) labels, None while the model knows no class; best (n_good,) index into classes;
        proba (n_good, n_classes), NaN rows where the model knew no class yet; versions (n_good,) the
        examples the model predicting each row had learned; explanations (only the JSON predictions
        carry them); served_by : the model to name in each prediction, and the challengers'
        predictions of the good rows to show beside it (None: none; a format of many rows per
        message names the model only)."""


class PredictionEncoder(Protocol):
    def __call__(self, ids: list[FieldValue], classes: AnyArray | None, best: IndexArray | None,
                 proba: FloatArray | None, versions: IntArray | int, topic: str, partitions: list[int],
                 offsets: list[int]) -> list[bytes]:
        """The prediction of each message, as ``json_predictions.prediction_values`` takes them
        (the JSON one also takes ``served_by``)."""


class JsonMessages:
    """One JSON object per message, answered by one prediction: a JSON object, or what
    ``predictions`` writes (Avro records with --output-format avro)."""

    def __init__(self, fields: MessageFields, predictions: PredictionEncoder = prediction_values):
        self.fields, self.predictions = fields, predictions

    def decode(self, values: Sequence[bytes | None], spec: FeatureSpec, label_kind: str | None) -> Decoded:
        return decode(values, spec, self.fields, label_kind=label_kind)

    def encode(self, polled: Polled, decoded: Decoded, good: BoolArray, predictions: ModelPredictions,
               served_by: ServedBy | None = None) -> tuple[list[int], list[bytes]]:
        rows = np.flatnonzero(good).tolist()
        ids, partitions, offsets = [decoded.ids[i] for i in rows], polled.partitions[good].tolist(), \
            polled.offsets[good].tolist()
        if served_by is None and predictions.explanations is None and predictions.keys is None:
            return rows, self.predictions(ids, predictions.classes, predictions.best, predictions.proba,
                                          predictions.versions, polled.topic, partitions, offsets)
        return rows, named_prediction_values(ids, predictions, polled.topic, partitions, offsets, served_by)


class RegistryMessages(JsonMessages):
    """One record per message in the Confluent wire format, its writer schema in a Schema
    Registry; read into an object as a JSON message is, and answered by one JSON prediction."""

    def __init__(self, fields: MessageFields, records: RegistryRecords,
                 predictions: PredictionEncoder = prediction_values):
        super().__init__(fields, predictions)
        self.records = records

    def decode(self, values: Sequence[bytes | None], spec: FeatureSpec, label_kind: str | None) -> Decoded:
        with self.records.poll():
            return self._decode(values, spec, label_kind)

    def _decode(self, values: Sequence[bytes | None], spec: FeatureSpec, label_kind: str | None) -> Decoded:
        if spec.kind == "vector" and len(values) > 1:
            read = self.records.vectors(values, self.fields)
            decoded = None if read is None else decode_vectors(read, spec, label_kind)
            if decoded is not None:
                return decoded
        if spec.kind == "text" and len(values) > 1:
            table = self.records.table(values, self.fields)
            decoded = None if table is None else decode_table(table, spec, self.fields, label_kind)
            if decoded is not None:
                return decoded
        objects, problems = self.records.read(values, spec, self.fields)
        return decode_objects(objects, problems, spec, self.fields, label_kind=label_kind)


class ArrowMessages:
    """An Arrow IPC stream of many rows per message, answered by one stream of predictions per message."""

    def __init__(self, fields: MessageFields):
        self.fields = fields

    def decode(self, values: Sequence[bytes | None], spec: FeatureSpec, label_kind: str | None) -> Decoded:
        return decode_arrow(values, spec, self.fields, label_kind=label_kind)

    def encode(self, polled: Polled, decoded: Decoded, good: BoolArray, predictions: ModelPredictions,
               served_by: ServedBy | None = None) -> tuple[list[int], list[bytes]]:
        classes, best = predictions.classes, predictions.best
        labels = None if classes is None or best is None else classes[best]
        return encode_predictions(polled, decoded, np.flatnonzero(good), labels, predictions.proba, classes,
                                  predictions.versions, None if served_by is None else served_by.model)


def message_format(fields: MessageFields, records: RegistryRecords | None = None,
                   predictions: PredictionEncoder = prediction_values) -> MessageFormat:
    """The format ``fields.format`` names (one of FORMATS); records : how a format of
    REGISTRY_FORMATS reads its records; predictions : how the predictions of a format of one
    example per message are written (Arrow messages are answered in Arrow)."""
    if fields.format in REGISTRY_FORMATS:
        assert records is not None, "a registry format needs its records' reader"
        return RegistryMessages(fields, records, predictions)
    return ArrowMessages(fields) if fields.format == "arrow" else JsonMessages(fields, predictions)
