"""Kafka message values (JSON objects) to Arrow batches for the feature spec.

A message is one example::

    {"id": "m-1", "features": [0, 0, 255, ...], "label": 7}          a list of numbers
    {"id": "m-2", "features": {"age": 31, "income": 5.2}, "label": 1}  named features
    {"id": "m-3", "text": "WINNER!! claim your prize", "label": "spam"}  text

Field names are configurable; ``label`` and ``id`` are optional. Anything that cannot be
read (not JSON, not an object, a feature of the wrong type, too large) is recorded as a
problem of that message; the batch is still built, with a null in its place.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import orjson
import pyarrow as pa

from nbstream.arrow import FeatureSpec, RowProblems

from ..config import MessageFields


@dataclass
class Decoded:
    """One example per message, in message order."""
    batch: pa.RecordBatch  # the spec's columns plus "label"
    ids: list
    problems: RowProblems


def decode(values: list[bytes | None], spec: FeatureSpec, fields: MessageFields) -> Decoded:
    """One example per message; the batch has the spec's columns plus "label"."""
    n = len(values)
    errors: list[str | None] = [None] * n
    ids, labels = [None] * n, [None] * n
    columns: dict[str, list] = {name: [None] * n for name in spec.columns}
    for i, value in enumerate(values):
        if value is None:
            errors[i] = "empty message"
            continue
        if len(value) > fields.max_bytes:
            errors[i] = f"message of {len(value)} bytes exceeds the limit of {fields.max_bytes}"
            continue
        try:
            message = orjson.loads(value)
        except orjson.JSONDecodeError as error:
            errors[i] = f"malformed JSON: {error}"
            continue
        if not isinstance(message, dict):
            errors[i] = f"expected a JSON object; got {type(message).__name__}"
            continue
        ids[i] = message.get(fields.id)
        labels[i] = message.get(fields.label)
        errors[i] = _take_features(message, spec, fields, columns, i)
    problems = RowProblems(n)
    bad = np.array([e is not None for e in errors])
    if bad.any():
        problems.flag(bad, "message", np.array(errors, dtype=object))
    arrays = {name: _to_arrow(name, column, spec, problems) for name, column in columns.items()}
    arrays["label"] = _labels_to_arrow(labels)
    return Decoded(pa.record_batch(arrays), ids, problems)


def _take_features(message: dict, spec: FeatureSpec, fields: MessageFields, columns: dict, i: int) -> str | None:
    if spec.kind == "text":
        text = message.get(fields.text)
        if not isinstance(text, str):
            return f"field {fields.text!r} must be a string"
        columns[fields.text][i] = text
        return None
    features = message.get(fields.features)
    if spec.kind == "vector":
        if not isinstance(features, list):
            return f"field {fields.features!r} must be a list of numbers"
        columns[spec.columns[0]][i] = features
        return None
    if not isinstance(features, dict):
        return f"field {fields.features!r} must be an object with keys {list(spec.columns)}"
    missing = [name for name in spec.columns if name not in features]
    if missing:
        return f"features {missing} missing"
    for name in spec.columns:
        columns[name][i] = features[name]
    return None


def _to_arrow(name: str, values: list, spec: FeatureSpec, problems: RowProblems) -> pa.Array:
    """One column for the whole batch; a value of the wrong type becomes a null and a problem."""
    if spec.kind in ("text", "categorical"):
        if spec.kind == "categorical":
            values = [None if v is None else str(v) for v in values]
        return _typed_array(name, values, pa.string(), problems)
    try:  # let Arrow infer: JSON integers stay int64 (much faster than converting each to float)
        array = pa.array(values)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError):
        array = None
    numeric = pa.list_(pa.float64()) if spec.kind == "vector" else pa.float64()
    if array is None or not _numeric(array.type.value_type if spec.kind == "vector" and pa.types.is_list(array.type)
                                     else array.type):
        return _typed_array(name, values, numeric, problems)
    return array


def _numeric(arrow_type: pa.DataType) -> bool:
    return pa.types.is_integer(arrow_type) or pa.types.is_floating(arrow_type) or pa.types.is_null(arrow_type)


def _typed_array(name: str, values: list, arrow_type: pa.DataType, problems: RowProblems) -> pa.Array:
    try:
        return pa.array(values, type=arrow_type)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError):
        cleaned, bad = [], np.zeros(len(values), dtype=bool)
        for i, value in enumerate(values):
            try:
                pa.array([value], type=arrow_type)
                cleaned.append(value)
            except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError):
                cleaned.append(None)
                bad[i] = True
        problems.flag(bad, name, "non-numeric value" if arrow_type != pa.string() else "not a string")
        return pa.array(cleaned, type=arrow_type)


def _labels_to_arrow(labels: list) -> pa.Array:
    try:
        return pa.array(labels)
    except (pa.ArrowInvalid, pa.ArrowTypeError):  # numbers and strings mixed: compare as text
        return pa.array([None if label is None else str(label) for label in labels], pa.string())
