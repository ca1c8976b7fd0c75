"""Kafka message values (JSON objects) to Arrow batches for the feature encoder.

A message is one example::

    {"id": "m-1", "features": [0, 0, 255, ...], "label": 7}          a list of numbers
    {"id": "m-2", "features": {"age": 31, "income": 5.2}, "label": 1}  named features
    {"id": "m-3", "text": "WINNER!! claim your prize", "label": "spam"}  text

Field names are configurable; ``label`` and ``id`` are optional. Nothing about a message's
content raises: anything that cannot be read (not JSON, not an object, a null or empty
value, too large, a feature of the wrong type, a label that is not a string or a number or
not of the model's label kind) is recorded as that message's problem, and the batch is
still built with typed columns and a null in its place, even when every message is bad.
"""

from __future__ import annotations

import io
from dataclasses import dataclass

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.json as pa_json

from nbstream.arrow import FeatureSpec, RowProblems

from .fields import LABEL_COLUMN, MessageFields
from .json_vectors import read_vectors
from .records import Polled

STRING, NUMBER = "string", "number"  # the two kinds of label


@dataclass
class Decoded:
    """One example per message, in message order."""
    batch: pa.RecordBatch  # the spec's columns plus LABEL_COLUMN (strings, or numbers)
    ids: list
    problems: RowProblems
    label_kind: str | None  # the kind of the labels read (None: no label in the batch)
    # Arrow batch messages only (None for JSON, where row i is message i):
    message_of: np.ndarray | None = None  # (n_rows,) the message each row came from
    row_in_message: np.ndarray | None = None  # (n_rows,) its row inside that message (-1: the whole message)
    row_values: object = None  # row_values[i]: row i alone, as the dead-letter topic gets it

    def rows_of(self, polled: Polled) -> Polled:
        """The poll with one row per example: itself when each message holds one."""
        if self.message_of is None:
            return polled
        return polled.expand(self.message_of, self.row_in_message, self.row_values)


def label_kind_of(value) -> str | None:
    """STRING or NUMBER for a usable label, None for anything else (booleans included)."""
    if isinstance(value, str):
        return STRING
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return NUMBER
    return None


def label_kind_of_type(arrow_type: pa.DataType) -> str | None:
    """The same for a column of labels: STRING, NUMBER, or None (booleans, nulls, nested)."""
    if pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type):
        return STRING
    return NUMBER if _numeric(arrow_type) else None


def value_problem(value: bytes | None, max_bytes: int) -> str | None:
    """What makes a message value unusable before it is even parsed, if anything."""
    if value is None:
        return "empty message (null value)"
    if not value:
        return "empty message"
    if len(value) > max_bytes:
        return f"message of {len(value)} bytes exceeds the limit of {max_bytes}"
    return None


def decode(values: list[bytes | None], spec: FeatureSpec, fields: MessageFields,
           label_kind: str | None = None) -> Decoded:
    """Decode a poll's message values.

    label_kind : the kind of label the model learns (STRING or NUMBER), or None while it has
        learned none: then the batch's first usable label decides.

    A batch whose messages are all well-formed is parsed in one go: lists of numbers by
    simdjson, anything else by Arrow's JSON reader (C++, on all cores); anything they cannot
    take as it is, or whose result leaves room for doubt, goes message by message, where each
    message's problem gets its name.
    """
    if len(values) < 2 or not _all_usable_sizes(values, fields.max_bytes):
        return _one_by_one(values, spec, fields, label_kind)
    return (spec.kind == "vector" and _bulk_vectors(values, spec, fields, label_kind)) or \
        _bulk(values, spec, fields, label_kind) or _one_by_one(values, spec, fields, label_kind)


def _all_usable_sizes(values: list, max_bytes: int) -> bool:
    """Whether no value has a ``value_problem``: every one present, not empty, within the limit
    (in passes that stay in C, where a per-message check would cost more than parsing)."""
    if None in values:
        return False
    sizes = list(map(len, values))
    return min(sizes) > 0 and max(sizes) <= max_bytes


def _bulk_vectors(values: list, spec: FeatureSpec, fields: MessageFields, label_kind: str | None) -> Decoded | None:
    """The batch (of present values within the size limit) read by simdjson, or None to try the
    general ways."""
    read = read_vectors(values, fields.features, fields.label, fields.id)
    if read is None:
        return None
    kinds = {label_kind_of(label) for label in read.labels if label is not None}
    if None in kinds or len(kinds) > 1 or (label_kind is not None and kinds and kinds != {label_kind}):
        return None
    kind = kinds.pop() if kinds else None
    problems = RowProblems(len(values))
    features = pa.ListArray.from_arrays(pa.array(read.offsets), pa.array(read.values))
    batch = pa.record_batch({spec.columns[0]: features, LABEL_COLUMN: _label_column(read.labels, kind, problems)})
    return Decoded(batch, read.ids, problems, kind)


_BULK_BLOCK = 1 << 20  # bytes of JSON per parsing task


def _bulk(values: list, spec: FeatureSpec, fields: MessageFields, label_kind: str | None) -> Decoded | None:
    """The batch (of present values within the size limit) parsed by Arrow's JSON reader, or
    None to decode it message by message."""
    data = b"\n".join(values)
    if data.count(b"\n") != len(values) - 1:  # a value holds a line break: not one JSON document per line
        return None
    try:
        table = pa_json.read_json(io.BytesIO(data), read_options=pa_json.ReadOptions(
            block_size=max(_BULK_BLOCK, max(map(len, values)) + 1)))
        table.validate(full=True)  # the reader passes invalid UTF-8 inside strings through
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):  # not all objects, types differ: one by one
        return None
    if table.num_rows != len(values):
        return None
    columns = _bulk_features(table, spec, fields)
    labels = _bulk_labels(table, fields, label_kind)
    if columns is None or labels is None:
        return None
    if fields.id in table.column_names:
        id_type = table.column(fields.id).type
        # objects would come back with other rows' keys as nulls, and where one id is a fraction (or
        # beyond 64 bits) every integer id of the batch would come back as a float: 7 as 7.0
        if pa.types.is_nested(id_type) or pa.types.is_floating(id_type):
            return None
        ids = table.column(fields.id).to_pylist()
    else:
        ids = [None] * len(values)
    batch = pa.record_batch({**columns, LABEL_COLUMN: labels[0]})
    return Decoded(batch, ids, RowProblems(len(values)), labels[1])


def _bulk_features(table: pa.Table, spec: FeatureSpec, fields: MessageFields) -> dict | None:
    """The spec's columns from the reader's table, when every message has them with the right type."""
    if spec.kind == "text":
        column = table.column(fields.text) if fields.text in table.column_names else None
        if column is None or column.null_count or not pa.types.is_string(column.type):
            return None
        return {spec.columns[0]: column.combine_chunks()}
    column = table.column(fields.features) if fields.features in table.column_names else None
    if column is None or column.null_count:
        return None
    column = column.combine_chunks()
    if spec.kind == "vector":
        if not pa.types.is_list(column.type) or not _numeric(column.type.value_type):
            return None
        return {spec.columns[0]: column}
    if not pa.types.is_struct(column.type):
        return None
    found = {column.type.field(i).name: column.field(i) for i in range(column.type.num_fields)}
    wanted = {}
    for name in spec.columns:
        child = found.get(name)
        if child is None or child.null_count:
            return None
        if spec.kind == "categorical" and not pa.types.is_string(child.type):
            return None  # numbers as categories: their text is str() of the number, message by message
        if spec.kind == "columns" and not _numeric(child.type):
            return None
        wanted[name] = child
    return wanted


def _bulk_labels(table: pa.Table, fields: MessageFields, label_kind: str | None) -> tuple | None:
    """(label column, label kind) when every label present is of one usable kind (the model's, if known)."""
    if fields.label not in table.column_names:
        return pa.nulls(table.num_rows, pa.string()), None
    labels = table.column(fields.label).combine_chunks()
    if labels.null_count == len(labels):
        return pa.nulls(table.num_rows, pa.string()), None
    kind = label_kind_of_type(labels.type)
    if kind is None or (label_kind is not None and kind != label_kind):
        return None
    return labels, kind


def _one_by_one(values: list, spec: FeatureSpec, fields: MessageFields, label_kind: str | None) -> Decoded:
    n = len(values)
    errors: list[str | None] = [None] * n
    ids, labels = [None] * n, [None] * n
    columns: dict[str, list] = {name: [None] * n for name in spec.columns}
    for i, value in enumerate(values):
        message, errors[i] = _parse(value, fields.max_bytes)
        if message is None:
            continue
        ids[i] = message.get(fields.id)
        errors[i] = _take_features(message, spec, fields, columns, i)
        label = message.get(fields.label)
        if errors[i] is None and label is not None:
            kind = label_kind_of(label)
            if kind is None:
                errors[i] = f"label must be a string or a number; got {_json_type(label)}"
            elif label_kind is not None and kind != label_kind:
                errors[i] = f"label {label!r} is a {kind}; the model's labels are {label_kind}s"
            else:
                label_kind = kind
                labels[i] = label
    problems = RowProblems(n)
    bad = np.array([e is not None for e in errors], dtype=bool)
    if bad.any():
        problems.flag(bad, "message", np.array(errors, dtype=object))
    arrays = {name: _column(name, column, spec, problems) for name, column in columns.items()}
    arrays[LABEL_COLUMN] = _label_column([None if b else label for b, label in zip(bad, labels)], label_kind, problems)
    return Decoded(pa.record_batch(arrays), ids, problems, label_kind if any(v is not None for v in labels) else None)


def _parse(value: bytes | None, max_bytes: int) -> tuple[dict | None, str | None]:
    """(message, None) or (None, the problem)."""
    problem = value_problem(value, max_bytes)
    if problem is not None:
        return None, problem
    try:
        message = orjson.loads(value)
    except orjson.JSONDecodeError as error:
        return None, f"malformed JSON: {error}"
    if not isinstance(message, dict):
        return None, f"expected a JSON object; got {type(message).__name__}"
    return message, None


def _json_type(value) -> str:
    return {bool: "a boolean", dict: "an object", list: "a list"}.get(type(value), type(value).__name__)


def _take_features(message: dict, spec: FeatureSpec, fields: MessageFields, columns: dict, i: int) -> str | None:
    if spec.kind == "text":
        text = message.get(fields.text)
        if not isinstance(text, str):
            return f"field {fields.text!r} must be a string"
        columns[spec.columns[0]][i] = text
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


def _column(name: str, values: list, spec: FeatureSpec, problems: RowProblems) -> pa.Array:
    """One column of the spec's type for the whole batch; a value of the wrong type becomes a
    null and a problem of its row."""
    if spec.kind in ("text", "categorical"):
        if spec.kind == "categorical":
            values = [None if v is None else str(v) for v in values]
        return _typed(name, values, pa.string(), problems)
    numeric = pa.list_(pa.float64()) if spec.kind == "vector" else pa.float64()
    try:  # let Arrow infer: JSON integers stay int64 (much faster than converting each to float)
        array = pa.array(values)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError):
        return _typed(name, values, numeric, problems)
    inferred = array.type.value_type if spec.kind == "vector" and pa.types.is_list(array.type) else array.type
    if spec.kind == "vector" and not pa.types.is_list(array.type) or not _numeric(inferred):
        return _typed(name, values, numeric, problems)
    return array


def _numeric(arrow_type: pa.DataType) -> bool:
    return pa.types.is_integer(arrow_type) or pa.types.is_floating(arrow_type)


def _typed(name: str, values: list, arrow_type: pa.DataType, problems: RowProblems) -> pa.Array:
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


def _label_column(labels: list, kind: str | None, problems: RowProblems) -> pa.Array:
    """Strings, or numbers (int64 when all are integers, else float64); nulls where unlabeled."""
    if kind == STRING:
        return pa.array(labels, pa.string())
    if kind is None:
        return pa.nulls(len(labels), pa.string())
    try:
        return pa.array(labels, pa.int64() if all(isinstance(v, int) for v in labels if v is not None)
                        else pa.float64())
    except (pa.ArrowInvalid, OverflowError):  # an integer beyond 64 bits
        cleaned = []
        for i, label in enumerate(labels):
            fits = label is None or isinstance(label, float) or -2**63 <= label < 2**63
            cleaned.append(label if fits else None)
            if not fits:
                problems.flag(np.arange(len(labels)) == i, "label", "label is an integer beyond 64 bits")
        return _label_column(cleaned, kind, problems)
