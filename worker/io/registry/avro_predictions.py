"""Predictions as Avro records in the Confluent wire format (``worker serve --output-format avro``).

The schema, registered under OUTPUT-value when the service starts::

    {"type": "record", "name": "Prediction", "namespace": "nbstream", "fields": [
      {"name": "id", "type": ["null", "string", "long", "double", "boolean"]},
      {"name": "prediction", "type": ["null", "string", "long", "double"]},   null while the
                                                                              model knows no class
      {"name": "probabilities", "type": {"type": "map", "values": "double"}},
      {"name": "model_version", "type": "long"},
      {"name": "topic", "type": "string"}, {"name": "partition", "type": "int"},
      {"name": "offset", "type": "long"}]}

The id and the class keep the type they came with, as in the JSON prediction, through a union:
one schema serves every input, and an Avro reader gets a string as a string and 7 as 7. An
integer id beyond 64 bits is written as its decimal string. The probabilities are a map of
class to probability, as in the JSON prediction: every Avro library reads a map as its
language's dictionary, a consumer looks a class up by name, and the schema does not change when
classes come; the class is the map's key, a string (7 as "7").

A poll's records are written a column at a time, as the JSON ones are: every probability of the
poll by one ``tobytes`` of a structured array whose rows are already the map's entries (key,
double, key, double, ...); each record is then a join of pieces. fastavro and confluent_kafka's
AvroDeserializer read them as they read their own (the tests check both).
"""

from __future__ import annotations

import json

import numpy as np

from nbstream.utils.ndarrays import AnyArray, FloatArray, IndexArray, IntArray

from ..records import FieldValue
from .client import RegistryClient
from .wire import frame

VALUE_TYPES = ("null", "string", "long", "double", "boolean")  # an id's union; a class's without boolean
SCHEMA = {"type": "record", "name": "Prediction", "namespace": "nbstream", "fields": [
    {"name": "id", "type": list(VALUE_TYPES), "default": None},
    {"name": "prediction", "type": list(VALUE_TYPES[:4]), "default": None},
    {"name": "probabilities", "type": {"type": "map", "values": "double"}},
    {"name": "model_version", "type": "long"},
    {"name": "topic", "type": "string"},
    {"name": "partition", "type": "int"},
    {"name": "offset", "type": "long"}]}
NULL = b"\x00"  # branch 0 of a union, and the end of a map


def long_bytes(value: int) -> bytes:
    """An Avro int or long: a zigzag varint."""
    n = (value << 1) ^ (value >> 63)
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def string_bytes(text: str) -> bytes:
    encoded = text.encode("utf-8", "surrogatepass")
    return long_bytes(len(encoded)) + encoded


def union_bytes(value: object) -> bytes:
    """A value of the id's or class's union: its branch, then its encoding."""
    if value is None:
        return NULL
    if isinstance(value, bool):
        return b"\x08" + (b"\x01" if value else b"\x00")
    if isinstance(value, int):
        return b"\x04" + long_bytes(value) if -2**63 <= value < 2**63 else b"\x02" + string_bytes(str(value))
    if isinstance(value, float):
        return b"\x06" + np.float64(value).astype("<f8").tobytes()  # type: ignore[no-any-return]  # numpy: Any
    return b"\x02" + string_bytes(value if isinstance(value, str) else json.dumps(value))


class AvroPredictions:
    """Writes predictions as framed Avro records by the registered schema ``schema_id``."""

    def __init__(self, schema_id: int):
        self.schema_id = schema_id
        self._header = frame(schema_id, b"")

    @classmethod
    def registered(cls, client: RegistryClient, subject: str) -> AvroPredictions:
        """Register the predictions' schema under ``subject`` (or find it there). Raises
        RegistryRefused (say, a schema incompatible with the subject's) or RegistryUnavailable."""
        return cls(client.register(subject, json.dumps(SCHEMA)))

    def values(self, ids: list[FieldValue], classes: AnyArray | None, best: IndexArray | None, proba: FloatArray | None,
               versions: IntArray | int, topic: str, partitions: list[int], offsets: list[int]) -> list[bytes]:
        """The framed prediction of each message (arguments as ``json_predictions.prediction_values``
        takes them)."""
        n = len(ids)
        if n == 0:
            return []
        tail = string_bytes(topic)
        heads = [self._header + union_bytes(i) for i in ids]
        versions_ = [long_bytes(v) for v in np.broadcast_to(versions, (n,)).tolist()]
        places = [tail + long_bytes(p) + long_bytes(o) for p, o in zip(partitions, offsets, strict=True)]
        unscored = NULL + NULL  # no prediction, an empty map
        if classes is None or best is None or proba is None or not len(classes):
            return [h + unscored + v + p for h, v, p in zip(heads, versions_, places, strict=True)]
        labels = classes.tolist()
        predicted = [union_bytes(label) for label in labels]
        scored = ~np.isnan(proba[:, 0])
        maps = _map_entries(proba, labels)
        return [h + predicted[b] + m + v + p if s else h + unscored + v + p
                for h, b, m, s, v, p in zip(heads, best.tolist(), maps, scored.tolist(), versions_, places,
                                            strict=True)]


def _map_entries(proba: FloatArray, labels: list[FieldValue]) -> list[bytes]:
    """Each row's probabilities as an Avro map<double> keyed by the classes' names: one block of
    the entries' count, the entries, and the closing 0."""
    keys = [string_bytes(str(label)) for label in labels]
    layout = np.dtype([item for j, key in enumerate(keys) for item in ((f"k{j}", f"S{len(key)}"), (f"v{j}", "<f8"))])
    rows = np.empty(len(proba), dtype=layout)
    for j, key in enumerate(keys):
        rows[f"k{j}"] = key
        rows[f"v{j}"] = proba[:, j]
    data, size = rows.tobytes(), layout.itemsize
    count = long_bytes(len(keys))
    return [count + data[start:start + size] + NULL for start in range(0, len(data), size)]
