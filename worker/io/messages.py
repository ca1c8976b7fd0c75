"""Kafka message values (JSON objects) to Arrow batches for the feature encoder.

A message is one example::

    {"id": "m-1", "features": [0, 0, 255, ...], "label": 7}          a list of numbers
    {"id": "m-2", "features": {"age": 31, "income": 5.2}, "label": 1}  named features
    {"id": "m-3", "text": "WINNER!! claim your prize", "label": "spam"}  text

Field names are configurable; ``label`` and ``id`` are optional. Nothing about a message's
content raises: anything that cannot be read (not JSON, not an object, a null or empty
value, too large, a key given twice, a feature of the wrong type, a label that is not a
string or a number, not of the model's label kind, or a number beyond ±2**53) is recorded as
that message's problem, and the batch is still built with typed columns and a null in its
place, even when every message is bad.

A message means the same whatever else is in its poll. Read alone it is read by orjson (and
``json_exact`` where orjson cannot settle it); the bulk readers take a poll only when each of
its messages would be read exactly so, and leave it to that message-by-message reading
otherwise. So, in every path:

- a UTF-8 byte order mark is malformed JSON (RFC 8259 forbids sending one), as are NaN,
  Infinity and numbers beyond the range of a double, and nesting deeper than 1024 levels;
- a key given twice is refused: "duplicate key 'label'";
- features are numbers read as the nearest double, however they are written (integers of any
  size included);
- a number label must lie within ±2**53, where every integer is exact whether the label column
  holds integers or doubles;
- an id comes back exactly as it was sent (2**70 included).
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeGuard

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pa_json

from nbstream.arrow import FeatureSpec, RowProblems
from nbstream.utils.ndarrays import AnyArray, FloatArray, IntArray

from .fields import LABEL_COLUMN, MessageFields
from .json_exact import MAX_DEPTH, DuplicateKey, needs_exact_reading, read_exactly
from .json_vectors import Vectors, read_vectors
from .records import FieldValue, Polled

STRING, NUMBER = "string", "number"  # the two kinds of label
EXACT_LABELS = 2**53  # number labels lie within ±EXACT_LABELS: every integer there is exact as a double
MOST_ID_CHARACTERS = 1_024  # the longest id a message waiting for its label may have
MOST_ID_BITS = 3_400  # an integer id of about MOST_ID_CHARACTERS decimal digits


@dataclass
class Decoded:
    """One example per message, in message order."""
    batch: pa.RecordBatch  # the spec's columns plus LABEL_COLUMN (strings, or numbers)
    ids: list[FieldValue]  # each message's id as it came (None: none)
    problems: RowProblems
    label_kind: str | None  # the kind of the labels read (None: no label in the batch)
    # Arrow batch messages only (None for JSON, where row i is message i):
    message_of: IntArray | None = None  # (n_rows,) the message each row came from
    row_in_message: IntArray | None = None  # (n_rows,) its row inside that message (-1: the whole message)
    row_values: Sequence[bytes | None] | None = None  # row_values[i]: row i alone, as the dead-letter topic gets it

    def message_index(self) -> IntArray:
        """(n_rows,) the message each row came from."""
        return np.arange(self.batch.num_rows) if self.message_of is None else self.message_of

    def rows_of(self, polled: Polled) -> Polled:
        """The poll with one row per example: itself when each message holds one."""
        if self.message_of is None or self.row_in_message is None or self.row_values is None:
            return polled
        return polled.expand(self.message_of, self.row_in_message, self.row_values)


def label_kind_of(value: object) -> str | None:
    """STRING or NUMBER for a usable label, None for anything else (booleans included)."""
    if isinstance(value, str):
        return STRING
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return NUMBER
    return None


def label_problem(label: FieldValue, label_kind: str | None) -> str | None:
    """What makes a message's label unusable, if anything (a missing label is no problem).

    label_kind : the kind of label the model learns, None while any kind may be learned."""
    if label is None:
        return None
    kind = label_kind_of(label)
    if kind is None:
        return f"label must be a string or a number; got {_json_type(label)}"
    if label_kind is not None and kind != label_kind:
        return f"label {label!r} is a {kind}; the model's labels are {label_kind}s"
    if kind == NUMBER and label != label:  # NaN: a schema format's double can hold one, JSON cannot
        return "label is NaN, not a number"
    if kind == NUMBER and not -EXACT_LABELS <= label <= EXACT_LABELS:
        return f"label {label!r} is beyond ±2**53, where numbers are not all exact"
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


def decode(values: Sequence[bytes | None], spec: FeatureSpec, fields: MessageFields,
           label_kind: str | None = None) -> Decoded:
    """Decode a poll's message values.

    label_kind : the kind of label the model learns (STRING or NUMBER), or None while it has
        learned none: then the batch's first usable label decides.

    A batch whose messages are all well-formed is parsed in one go: lists of numbers by
    simdjson, anything else by Arrow's JSON reader (C++, on all cores); anything they cannot
    take as it is, or whose result leaves room for doubt, goes message by message, where each
    message's problem gets its name. Either way each message is read as it would be alone.
    """
    if len(values) < 2 or not _all_usable_sizes(values, fields.max_bytes):
        return _one_by_one(values, spec, fields, label_kind)
    return (spec.kind == "vector" and _bulk_vectors(values, spec, fields, label_kind)) or \
        _bulk(values, spec, fields, label_kind) or _one_by_one(values, spec, fields, label_kind)


def _all_usable_sizes(values: Sequence[bytes | None], max_bytes: int) -> TypeGuard[Sequence[bytes]]:
    """Whether no value has a ``value_problem``: every one present, not empty, within the limit
    (in passes that stay in C, where a per-message check would cost more than parsing)."""
    if not all_present(values):
        return False
    sizes = list(map(len, values))
    return min(sizes) > 0 and max(sizes) <= max_bytes


def all_present(values: Sequence[bytes | None]) -> TypeGuard[Sequence[bytes]]:
    """Whether no value is None (a null value)."""
    return None not in values


def _bulk_vectors(values: Sequence[bytes], spec: FeatureSpec, fields: MessageFields,
                  label_kind: str | None) -> Decoded | None:
    """The batch (of present values within the size limit) read by simdjson, or None to try the
    general ways."""
    read = read_vectors(values, fields.features, fields.label, fields.id)
    return None if read is None else decode_vectors(read, spec, label_kind)


def decode_vectors(read: Vectors, spec: FeatureSpec, label_kind: str | None) -> Decoded | None:
    """The examples of messages whose lists a fast reader took (JSON's, or a schema format's), or
    None when a label is of no usable kind, of two kinds, not of the model's or not exact: then
    the messages are to be read one by one, where each one's problem is named."""
    labels = [label for label in read.labels if label is not None]
    kinds = set(map(label_kind_of, labels))
    if None in kinds or len(kinds) > 1 or (label_kind is not None and kinds and kinds != {label_kind}):
        return None  # a label of no kind, of two kinds or not of the model's: named message by message
    if kinds == {NUMBER} and not all(-EXACT_LABELS <= label <= EXACT_LABELS for label in labels):
        return None  # beyond exact, or NaN (a schema format's double): named message by message
    kind = kinds.pop() if kinds else None
    features = pa.ListArray.from_arrays(pa.array(read.offsets), pa.array(one_byte_if_exact(read.values)))
    batch = pa.record_batch({spec.columns[0]: features, LABEL_COLUMN: _label_column(read.labels, kind)})
    return Decoded(batch, read.ids, RowProblems(len(read.ids)), kind)


def one_byte_if_exact(values: FloatArray) -> AnyArray:
    """The numbers (n,) as uint8 when every one is a whole number from 0 to 255 (pixels, small
    counts), else as they are: the same values, read further as a Parquet column of uint8 would be
    (no range checks, binarizing and exact integer sums on single bytes)."""
    if values.dtype == np.uint8 or not values.size or not 0 <= values.min() <= values.max() <= 255:
        return values  # a NaN fails the comparisons too
    narrow = values.astype(np.uint8)
    return narrow if np.array_equal(narrow, values) else values


_BULK_BLOCK = 1 << 20  # bytes of JSON per parsing task


def _bulk(values: Sequence[bytes], spec: FeatureSpec, fields: MessageFields, label_kind: str | None) -> Decoded | None:
    """The batch (of present values within the size limit) parsed by Arrow's JSON reader, or
    None to decode it message by message."""
    table = json_table(values)
    return None if table is None else decode_table(table, spec, fields, label_kind)


def json_table(values: Sequence[bytes]) -> pa.Table | None:
    """JSON objects (present values within the size limit), one per value, read by Arrow's JSON
    reader into a table of a row each; None where anything leaves room for doubt."""
    data, longest = b"\n".join(values), max(map(len, values))
    if not _one_object_per_line(values, data) or (longest > 2 * MAX_DEPTH and _may_nest_too_deep(values)):
        return None
    try:
        table = pa_json.read_json(io.BytesIO(data), read_options=pa_json.ReadOptions(
            block_size=max(_BULK_BLOCK, longest + 1)))
        table.validate(full=True)  # the reader passes invalid UTF-8 inside strings through
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, UnicodeDecodeError):  # types differ, a key twice, ...
        return None
    if table.num_rows != len(values) or not _keys_are_utf8(table.schema):
        return None
    return table


def decode_table(table: pa.Table, spec: FeatureSpec, fields: MessageFields, label_kind: str | None
                 ) -> Decoded | None:
    """The examples of messages read in bulk into a table of a row each (by Arrow's JSON reader, or
    a schema format's reader), or None when a column is missing, of the wrong type, holds a null or
    a non-finite number, or the labels are of no usable kind: then they are read one by one."""
    if not _all_finite(table):
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
        ids = [None] * table.num_rows
    batch = pa.record_batch({**columns, LABEL_COLUMN: labels[0]})
    return Decoded(batch, ids, RowProblems(table.num_rows), labels[1])


def _one_object_per_line(values: Sequence[bytes], data: bytes) -> bool:
    """Whether the values, joined by line breaks into ``data``, are one line each, each starting
    with "{". A value holding a line break would read as two; and Arrow's reader skips a byte order
    mark on the first line, and crashes the process on a first line of ``null``."""
    return data.count(b"\n") == len(values) - 1 and all(value[:1] == b"{" for value in values)


def _may_nest_too_deep(values: Sequence[bytes]) -> bool:
    """Whether a value may nest arrays and objects deeper than MAX_DEPTH: orjson refuses that, and
    Arrow's reader crashes the process some thousands of levels down. Each level takes two bytes,
    so only long values can; their brackets bound their depth."""
    return any(value.count(b"[") + value.count(b"{") > MAX_DEPTH for value in values if len(value) > 2 * MAX_DEPTH)


def _keys_are_utf8(schema: pa.Schema) -> bool:
    """Whether every key of every object is valid UTF-8, which orjson requires: the reader leaves
    keys unchecked, and reading an invalid one's name raises."""
    try:
        pending = [schema.field(name) for name in schema.names]
        while pending:
            kind = pending.pop().type
            if pa.types.is_struct(kind):
                pending.extend(kind.field(name) for name in kind.names)
            elif pa.types.is_list(kind):
                pending.append(kind.value_field)
    except UnicodeDecodeError:
        return False
    return True


def _all_finite(table: pa.Table) -> bool:
    """Whether no number anywhere in the table, in any field of any message, is NaN or infinite:
    Arrow's reader takes NaN, Infinity and integers beyond the range of a double, which orjson
    finds malformed."""
    pending = [chunk for column in table.columns for chunk in column.chunks]
    while pending:
        array = pending.pop()
        if pa.types.is_floating(array.type):
            if pc.is_finite(array).false_count:
                return False
        elif pa.types.is_struct(array.type):
            pending.extend(array.flatten())
        elif pa.types.is_list(array.type):
            pending.append(array.flatten())
    return True


def _bulk_features(table: pa.Table, spec: FeatureSpec, fields: MessageFields) -> dict[str, pa.Array] | None:
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


def _bulk_labels(table: pa.Table, fields: MessageFields, label_kind: str | None) -> tuple[pa.Array, str | None] | None:
    """(label column, label kind) when every label present is of one usable kind (the model's, if known)."""
    if fields.label not in table.column_names:
        return pa.nulls(table.num_rows, pa.string()), None
    labels = table.column(fields.label).combine_chunks()
    if labels.null_count == len(labels):
        return pa.nulls(table.num_rows, pa.string()), None
    kind = label_kind_of_type(labels.type)
    if kind is None or (label_kind is not None and kind != label_kind):
        return None
    if kind == NUMBER:  # strictly within: the reader gives 2**53 + 1 as the double 2**53
        extremes = pc.min_max(labels)
        if extremes["min"].as_py() <= -EXACT_LABELS or extremes["max"].as_py() >= EXACT_LABELS:
            return None
    return labels, kind


def _one_by_one(values: Sequence[bytes | None], spec: FeatureSpec, fields: MessageFields,
                label_kind: str | None) -> Decoded:
    parsed = [parse_object(value, fields) for value in values]
    return decode_objects([message for message, _ in parsed], [error for _, error in parsed], spec, fields,
                          label_kind)


def decode_objects(objects: list[dict[str, Any] | None], errors: list[str | None], spec: FeatureSpec,
                   fields: MessageFields, label_kind: str | None = None) -> Decoded:
    """The examples of messages already read into objects (JSON objects, or records of a schema),
    one per message: objects[i] is message i's, or None and errors[i] says why it could not be
    read. Fields are found by name as in a JSON object; label_kind as ``decode`` takes it."""
    n = len(objects)
    errors = list(errors)
    ids: list[FieldValue] = [None] * n
    labels: list[FieldValue] = [None] * n
    columns: dict[str, list[FieldValue]] = {name: [None] * n for name in spec.columns}
    for i, message in enumerate(objects):
        if message is None:
            continue
        ids[i] = message.get(fields.id)
        label = message.get(fields.label)
        errors[i] = _take_features(message, spec, fields, columns, i) or label_problem(label, label_kind)
        if errors[i] is None and label is not None:
            label_kind = label_kind_of(label)
            labels[i] = label
    problems = RowProblems(n)
    bad = np.array([e is not None for e in errors], dtype=bool)
    if bad.any():
        problems.flag(bad, "message", np.array(errors, dtype=object))
    arrays = {name: _column(name, column, spec, problems) for name, column in columns.items()}
    learned = [None if b else label for b, label in zip(bad, labels, strict=True)]
    arrays[LABEL_COLUMN] = _label_column(learned, label_kind)
    return Decoded(pa.record_batch(arrays), ids, problems, label_kind if any(v is not None for v in labels) else None)


@dataclass
class LabelEvents:
    """Label events, one per message: ``{"id": ..., "label": ...}`` under the fields' names.
    ids[i], labels[i] : message i's (None where it is unusable); errors[i] : why it is unusable, or None."""
    ids: list[FieldValue]
    labels: list[FieldValue]
    errors: list[str | None]


def read_label_events(values: Sequence[bytes | None], fields: MessageFields, label_kind: str | None) -> LabelEvents:
    """The label events of a poll's message values, read as messages are (``parse_object``). An event
    needs an id (a string or an integer: the id of the message it labels) and a label of the
    model's kind (label_kind as ``decode`` takes it)."""
    events = LabelEvents([], [], [])
    for value in values:
        message, error = parse_object(value, fields)
        key = label = None
        if message is not None:
            key, label = message.get(fields.id), message.get(fields.label)
            error = id_problem(key, fields.id) or (
                f"field {fields.label!r} is missing: a label event carries a label" if label is None
                else label_problem(label, label_kind))
        if error is None:
            label_kind = label_kind or label_kind_of(label)
        events.ids.append(key if error is None else None)
        events.labels.append(label if error is None else None)
        events.errors.append(error)
    return events


def id_problem(key: object, field: str) -> str | None:
    """What keeps ``key`` from naming a message that waits for its label, if anything: it must be a
    string or an integer, of MOST_ID_CHARACTERS at most (so that a store of waiting messages,
    bounded in number, is bounded in bytes too)."""
    if key is None:
        return f"field {field!r} is missing: a label event names the message it labels by its id"
    if type(key) is not str and type(key) is not int:
        return f"field {field!r} must be a string or an integer; got {_json_type(key)}"
    too_long = len(key) > MOST_ID_CHARACTERS if isinstance(key, str) else key.bit_length() > MOST_ID_BITS
    if too_long:
        return f"field {field!r} is longer than {MOST_ID_CHARACTERS:,} characters"
    return None


def parse_object(value: bytes | None, fields: MessageFields) -> tuple[dict[str, Any] | None, str | None]:
    """One message's JSON object: (message, None) or (None, the problem), by the rules above."""
    problem = value_problem(value, fields.max_bytes)
    if value is None or problem is not None:
        return None, problem
    try:
        message = orjson.loads(value)
    except orjson.JSONDecodeError as error:
        return None, f"malformed JSON: {error}"
    if not isinstance(message, dict):
        return None, f"expected a JSON object; got {type(message).__name__}"
    if not needs_exact_reading(value, message, fields.id):
        return message, None
    del message  # before the second reading: the two of a large message would double the memory it takes
    try:
        return read_exactly(value), None
    except DuplicateKey as error:
        return None, str(error)


def _json_type(value: object) -> str:
    return {bool: "a boolean", dict: "an object", list: "a list"}.get(type(value), type(value).__name__)


def _take_features(message: dict[str, Any], spec: FeatureSpec, fields: MessageFields,
                   columns: dict[str, list[FieldValue]], i: int) -> str | None:
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


def _column(name: str, values: list[FieldValue], spec: FeatureSpec, problems: RowProblems) -> pa.Array:
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
        return _typed(name, _as_doubles(values, spec.kind == "vector"), numeric, problems)
    inferred = array.type.value_type if spec.kind == "vector" and pa.types.is_list(array.type) else array.type
    if spec.kind == "vector" and not pa.types.is_list(array.type) or not _numeric(inferred):
        return _typed(name, _as_doubles(values, spec.kind == "vector"), numeric, problems)
    return array


def _as_doubles(values: list[FieldValue], lists: bool) -> list[FieldValue]:
    """The values (or lists of values) with each integer its nearest double. As a double, Arrow
    refuses an integer beyond ±2**53; a feature is a double however it is written."""
    if lists:
        return [[float(v) if type(v) is int else v for v in row] if type(row) is list else row for row in values]
    return [float(v) if type(v) is int else v for v in values]


def _numeric(arrow_type: pa.DataType) -> bool:
    return bool(pa.types.is_integer(arrow_type) or pa.types.is_floating(arrow_type))


def _typed(name: str, values: list[FieldValue], arrow_type: pa.DataType, problems: RowProblems) -> pa.Array:
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


def _label_column(labels: Sequence[FieldValue], kind: str | None) -> pa.Array:
    """Strings, or numbers (int64 when all are integers, else float64); nulls where unlabeled.
    labels : each None or free of any ``label_problem`` (so a number lies within ±2**53)."""
    if kind == STRING:
        return pa.array(labels, pa.string())
    if kind is None:
        return pa.nulls(len(labels), pa.string())
    return pa.array(labels, pa.int64() if all(isinstance(v, int) for v in labels if v is not None) else pa.float64())
