"""Kafka message values that are Arrow IPC streams of many rows (``--format arrow``).

A message holds the same columns as a Parquet file of examples: the feature spec's columns
(a list column, numeric or categorical columns, or a text column), optionally the label and
an id column, named as the message fields are. Rows are examples; each message's rows come
out in order, one after another, with their message and their row index inside it.

Nothing about a message's content raises. A message that cannot be read as a whole (not an
Arrow stream, a column missing or of the wrong type, too large) becomes one row with that
problem and row index -1, so it goes to the dead-letter topic unchanged; a bad row of a good
message (a null, NaN, a label of the wrong kind) becomes a problem of its row, which goes to
the dead-letter topic alone, as a one-row Arrow stream with its row index.

Predictions come back as one Arrow IPC stream per input message: its good rows in order,
with the columns of ``PREDICTION_SCHEMA_FIELDS`` and the class labels of the probability
lists in the schema metadata (``classes``, JSON); when the service names its models, a last
column "model" names the one that predicted.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import overload

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from nbstream.arrow import FeatureSpec, RowProblems
from nbstream.arrow.arrays import is_string_type
from nbstream.utils.ndarrays import AnyArray, BoolArray, FloatArray, IndexArray, IntArray

from .arrow_ipc_size import decompressed_size
from .fields import ID_COLUMN, LABEL_COLUMN, MessageFields
from .messages import EXACT_LABELS, NUMBER, Decoded, label_kind_of_type, label_problem, value_problem
from .records import FieldValue, Origin, Polled

WHOLE_MESSAGE = -1  # row index of a message that could not be read at all


def read_stream(value: bytes) -> pa.Table:
    """An Arrow IPC stream's rows as a table; raises pa.ArrowException for anything malformed."""
    with pa.ipc.open_stream(pa.py_buffer(value)) as reader:
        table = reader.read_all()
    table.validate(full=True)  # offsets and lengths that point outside the message
    return table


def write_stream(table: pa.Table | pa.RecordBatch, compression: str | None = None) -> bytes:
    """The rows as one Arrow IPC stream; compression ("lz4", "zstd") applies to its buffers, and
    readers undo it themselves (``read_stream`` and any Arrow reader)."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema, options=pa.ipc.IpcWriteOptions(compression=compression)) as writer:
        writer.write(table)
    return sink.getvalue().to_pybytes()  # type: ignore[no-any-return]  # pyarrow is untyped


@dataclass
class _Message:
    table: pa.Table | None  # the columns the model reads, plus LABEL_COLUMN and ID_COLUMN when present
    problem: str | None = None
    sent: pa.Table | None = None  # every column, as sent (what a bad row's dead letter holds)


def decode_arrow(values: Sequence[bytes | None], spec: FeatureSpec, fields: MessageFields,
                 label_kind: str | None = None) -> Decoded:
    """Decode a poll's messages into one batch of all their rows (see the module docstring).

    label_kind : the kind of label the model learns (STRING or NUMBER), or None while it has
        learned none: then the first message with labels decides.
    """
    messages = [_read(value, spec, fields) for value in values]
    for message in messages:
        if message.table is not None and LABEL_COLUMN in message.table.column_names:
            kind = label_kind_of_type(message.table.column(LABEL_COLUMN).type)
            label_kind = label_kind or kind
    pieces: list[pa.Table | None] = []
    message_of: list[IntArray] = []
    row_in_message: list[IntArray] = []
    problem_rows: list[BoolArray] = []
    problem_columns: list[str] = []
    problem_messages: list[str | None] = []
    for index, message in enumerate(messages):
        if message.table is None:
            pieces.append(None)
            message_of.append(np.array([index]))
            row_in_message.append(np.array([WHOLE_MESSAGE]))
            problem_rows.append(np.ones(1, dtype=bool))
            problem_columns.append("message")
            problem_messages.append(message.problem)
            continue
        n = message.table.num_rows
        pieces.append(message.table)
        message_of.append(np.full(n, index))
        row_in_message.append(np.arange(n))
        rows, problem = _foreign_labels(message.table, label_kind)
        problem_rows.append(rows)
        problem_columns.append("label")
        problem_messages.append(problem)
    batch, ids, label_problems = _combine(pieces, spec, label_kind)
    problems = RowProblems(batch.num_rows)
    for rows, why in label_problems:
        problems.flag(rows, "label", why)
    start = 0
    for rows, column, problem in zip(problem_rows, problem_columns, problem_messages, strict=True):
        if problem is not None:
            flagged = np.zeros(batch.num_rows, dtype=bool)
            flagged[start:start + len(rows)] = rows
            problems.flag(flagged, column, problem)
        start += len(rows)
    labels_seen = batch.column(LABEL_COLUMN).null_count < batch.num_rows
    message_index = np.concatenate(message_of) if message_of else np.zeros(0, np.int64)
    row_index = np.concatenate(row_in_message) if row_in_message else np.zeros(0, np.int64)
    return Decoded(batch, ids, problems, label_kind if labels_seen else None, message_index, row_index,
                   RowValues(values, [message.sent for message in messages], message_index, row_index))


def _read(value: bytes | None, spec: FeatureSpec, fields: MessageFields) -> _Message:
    problem = value_problem(value, fields.max_bytes)
    if problem is not None or value is None:
        return _Message(None, problem)
    size = decompressed_size(value)
    if size is not None and size > fields.max_bytes:
        return _Message(None, _too_large(value, size, fields.max_bytes))
    try:
        table = read_stream(value)
    except (pa.ArrowException, OSError, ValueError) as error:  # truncated streams raise OSError
        return _Message(None, f"not an Arrow IPC stream: {error}")
    columns, problem = _columns_of(table, spec, fields)
    if problem is not None:
        return _Message(None, problem)
    decoded = (table.nbytes if size is None else size) + sum(map(_dictionary_strings_bytes, columns.values()))
    if decoded > fields.max_bytes:  # a dictionary of long strings decodes to many copies of them
        return _Message(None, _too_large(value, decoded, fields.max_bytes))
    return _Message(pa.table(columns), sent=table)


def _columns_of(table: pa.Table, spec: FeatureSpec,
                fields: MessageFields) -> tuple[dict[str, pa.ChunkedArray], str | None]:
    """The columns a message's table gives (features, label, id), or the problem with them."""
    names = table.column_names  # a new list at every read: read once
    present = set(names)
    if len(present) < len(names):
        repeated = sorted(name for name, count in Counter(names).items() if count > 1)
        return {}, f"column names appear more than once: {repeated}"
    encoder = spec.encoder()
    for name in spec.columns:
        if name not in present:
            return {}, f"column {name!r} not found; columns are {names}"
        if not encoder.accepts(table.schema.field(name).type):
            return {}, f"column {name!r} has type {table.schema.field(name).type}; expected {encoder.expected}"
    columns = {name: table.column(name) for name in spec.columns}
    if fields.label in present:
        label = table.column(fields.label)
        if label.null_count < len(label) and label_kind_of_type(label.type) is None:
            return {}, f"label column {fields.label!r} has type {label.type}; expected strings or numbers"
        columns[LABEL_COLUMN] = label
    if fields.id in present:
        id_type = table.schema.field(fields.id).type
        if not (pa.types.is_integer(id_type) or is_string_type(id_type)):
            return {}, f"id column {fields.id!r} has type {id_type}; expected strings or integers"
        columns[ID_COLUMN] = table.column(fields.id)
    return columns, None


def _too_large(value: bytes, size: int, max_bytes: int) -> str:
    return f"message of {len(value)} bytes holds {size} once decoded, more than the limit of {max_bytes}"


def _dictionary_strings_bytes(column: pa.ChunkedArray) -> int:
    """The bytes of a dictionary column's strings once decoded (0 for other columns)."""
    if not (pa.types.is_dictionary(column.type) and is_string_type(column.type.value_type)):
        return 0
    return sum(pc.sum(pc.take(pc.binary_length(chunk.dictionary), chunk.indices)).as_py() or 0
               for chunk in column.chunks)


def _foreign_labels(table: pa.Table, label_kind: str | None) -> tuple[BoolArray, str | None]:
    """(rows, problem): the labeled rows of a message whose labels are not of the model's kind."""
    n = table.num_rows
    if LABEL_COLUMN not in table.column_names or table.column(LABEL_COLUMN).null_count == n:
        return np.zeros(n, dtype=bool), None
    kind = label_kind_of_type(table.column(LABEL_COLUMN).type)
    if kind == label_kind:
        return np.zeros(n, dtype=bool), None
    labeled = table.column(LABEL_COLUMN).is_valid().to_numpy(zero_copy_only=False)
    return labeled, f"labels of this message are {kind}s; the model's labels are {label_kind}s"


def _combine(pieces: list[pa.Table | None], spec: FeatureSpec, label_kind: str | None
             ) -> tuple[pa.RecordBatch, list[FieldValue], list[tuple[BoolArray, AnyArray]]]:
    """One batch of every message's rows (a placeholder null row for an unreadable message), their
    ids, and the rows whose label cannot be learned: a mask over the batch, and one problem per batch row
    (None elsewhere)."""
    feature_types = _common_types([p.select(list(spec.columns)) for p in pieces if p is not None], spec)
    labels = [None if p is None or LABEL_COLUMN not in p.column_names or label_kind_of_type(
        p.column(LABEL_COLUMN).type) != label_kind else p.column(LABEL_COLUMN).combine_chunks() for p in pieces]
    integers = all(pa.types.is_integer(column.type) for column in labels if column is not None)
    label_type = pa.string() if label_kind != NUMBER else pa.int64() if integers else pa.float64()
    columns: dict[str, list[pa.Array]] = {name: [] for name in (*spec.columns, LABEL_COLUMN)}
    ids: list[FieldValue] = []
    label_problems: list[tuple[BoolArray, AnyArray]] = []
    total = sum(1 if piece is None else piece.num_rows for piece in pieces)
    start = 0
    for piece, piece_labels in zip(pieces, labels, strict=True):
        n = 1 if piece is None else piece.num_rows
        for name in spec.columns:
            columns[name].append(pa.nulls(n, feature_types[name]) if piece is None
                                 else piece.column(name).cast(feature_types[name]).combine_chunks())
        if piece_labels is None:
            columns[LABEL_COLUMN].append(pa.nulls(n, label_type))
        else:
            held, unheld, problems = _labels_as(piece_labels, label_type)
            columns[LABEL_COLUMN].append(held)
            if unheld.any():
                rows = np.zeros(total, dtype=bool)
                rows[start:start + n] = unheld
                messages = np.full(total, None, dtype=object)
                messages[rows] = problems
                label_problems.append((rows, messages))
        ids.extend(piece.column(ID_COLUMN).to_pylist() if piece is not None and ID_COLUMN in piece.column_names
                   else [None] * n)
        start += n
    arrays = {name: pa.concat_arrays(parts) if parts else pa.array([], feature_types.get(name, label_type))
              for name, parts in columns.items()}
    if label_type == pa.float64() and len(arrays[LABEL_COLUMN]) and _all_integral(arrays[LABEL_COLUMN]):
        arrays[LABEL_COLUMN] = arrays[LABEL_COLUMN].cast(pa.int64())
    return pa.record_batch(arrays), ids, label_problems


def _labels_as(labels: pa.Array, label_type: pa.DataType) -> tuple[pa.Array, BoolArray, AnyArray]:
    """(labels cast to label_type, the rows whose number label lies beyond ±EXACT_LABELS (nulls
    there), each such row's problem) — the rule of JSON labels: within it every integer is exact,
    whether the poll's label column holds integers or doubles."""
    if label_type == pa.string():
        return labels.cast(label_type), np.zeros(len(labels), dtype=bool), np.array([], dtype=object)
    beyond = _beyond(labels, EXACT_LABELS)
    unheld = beyond.fill_null(False).to_numpy(zero_copy_only=False)
    problems = np.array([label_problem(value, NUMBER) for value in labels.filter(beyond).to_pylist()],
                        dtype=object)
    if unheld.any():
        labels = pc.if_else(beyond, pa.scalar(None, labels.type), labels)
    return labels.cast(label_type), unheld, problems


def _beyond(labels: pa.Array, limit: int) -> pa.Array:
    """Whether each number label lies outside -limit..limit (integers compared as integers)."""
    if pa.types.is_unsigned_integer(labels.type):
        return pc.greater(labels.cast(pa.uint64()), pa.scalar(limit, pa.uint64()))
    if pa.types.is_integer(labels.type):
        wide = labels.cast(pa.int64())
        return pc.or_(pc.greater(wide, pa.scalar(limit, pa.int64())), pc.less(wide, pa.scalar(-limit, pa.int64())))
    return pc.greater(pc.abs(labels.cast(pa.float64())), pa.scalar(float(limit)))


def _common_types(tables: list[pa.Table], spec: FeatureSpec) -> dict[str, pa.DataType]:
    """One type per feature column that every message's column can be cast to."""
    types = {}
    for name in spec.columns:
        seen = {table.schema.field(name).type for table in tables}
        if len(seen) == 1:
            types[name] = seen.pop()
        elif spec.kind == "vector":
            types[name] = pa.list_(pa.float64())
        elif spec.kind == "columns":
            types[name] = pa.float64()
        else:
            types[name] = pa.string()
    return types


def _all_integral(labels: pa.Array) -> bool:
    values = labels.drop_null().to_numpy(zero_copy_only=False)
    return bool(np.all(np.isfinite(values)) and np.all(values == np.round(values))
                and np.all(np.abs(values) <= EXACT_LABELS))


class RowValues(Sequence[bytes | None]):
    """values[i]: what goes to the dead-letter topic for row i of a decoded poll: the message
    itself when it could not be read, else the row alone as a one-row Arrow stream."""

    def __init__(self, messages: Sequence[bytes | None], tables: list[pa.Table | None], message_of: IntArray,
                 row_in_message: IntArray):
        """tables[m] : message m's columns as sent (None when it could not be read)."""
        self.messages, self.tables = messages, tables
        self.message_of, self.row_in_message = message_of, row_in_message

    def __len__(self) -> int:
        return len(self.message_of)

    @overload
    def __getitem__(self, i: int) -> bytes | None: ...

    @overload
    def __getitem__(self, i: slice) -> list[bytes | None]: ...

    def __getitem__(self, i: int | slice) -> bytes | None | list[bytes | None]:
        if isinstance(i, slice):  # as a Sequence takes it
            return [self[j] for j in range(*i.indices(len(self)))]
        message, row = int(self.message_of[i]), int(self.row_in_message[i])
        if row == WHOLE_MESSAGE:
            return self.messages[message]
        table = self.tables[message]
        assert table is not None  # the message was read: it has rows
        return write_stream(table.slice(row, 1))


def encode_predictions(polled: Polled, decoded: Decoded, rows: IndexArray, predicted: AnyArray | None,
                       proba: FloatArray | None, classes: AnyArray | None, versions: IntArray | int,
                       model: str | None = None) -> tuple[list[int], list[bytes]]:
    """One Arrow stream per input message with good rows: (message indexes, values).

    polled : the poll (one row per message); rows : (n_good,) the decoded rows predicted, in order;
    predicted : (n_good,) labels or None while the model knows no class; proba : (n_good, n_classes),
    a row of NaN where the model knew no class yet (a null prediction and probabilities);
    versions : (n_good,) the examples the model predicting each row had learned, or one for all;
    model : the name of the model that predicted them, in a last column "model" (None: no such column)
    """
    if decoded.message_of is None or decoded.row_in_message is None:
        raise ValueError("Arrow predictions need the rows' messages (a decode_arrow result)")
    message_of, row_in_message = decoded.message_of[rows], decoded.row_in_message[rows]
    ids = [decoded.ids[i] for i in rows.tolist()]
    n_classes = 0 if proba is None else proba.shape[1]
    unscored = np.ones(len(rows), dtype=bool) if proba is None or not n_classes else np.isnan(proba[:, 0])
    versions = np.broadcast_to(np.asarray(versions, dtype=np.int64), (len(rows),))
    metadata = {b"classes": orjson.dumps([] if classes is None else np.asarray(classes).tolist())}
    values, messages = [], []
    starts = np.flatnonzero(np.r_[True, message_of[1:] != message_of[:-1]]) if len(rows) else np.zeros(0, int)
    ends = np.r_[starts[1:], len(rows)]
    for start, end in zip(starts.tolist(), ends.tolist(), strict=True):
        message = int(message_of[start])
        n = end - start
        columns = {
            "id": _ids(ids[start:end]),
            "row": pa.array(row_in_message[start:end], pa.int32()),
            "prediction": pa.nulls(n) if predicted is None else pa.array(predicted[start:end],
                                                                         mask=unscored[start:end]),
            "probabilities": pa.FixedSizeListArray.from_arrays(
                pa.array(np.ascontiguousarray(proba[start:end]).ravel()), n_classes,
                mask=pa.array(unscored[start:end])) if proba is not None
            else pa.nulls(n, pa.list_(pa.float64())),
            "model_version": pa.array(versions[start:end]),
            "topic": pa.array([polled.topic] * n, pa.string()),
            "partition": pa.array(np.full(n, polled.partitions[message], np.int32)),
            "offset": pa.array(np.full(n, polled.offsets[message], np.int64)),
        }
        if model is not None:
            columns["model"] = pa.array([model] * n, pa.string())
        table = pa.table(columns).replace_schema_metadata(metadata)
        messages.append(message)
        values.append(write_stream(table))
    return messages, values


def _ids(values: list[FieldValue]) -> pa.Array:
    try:
        return pa.array(values)
    except (pa.ArrowException, TypeError, OverflowError):
        return pa.array([None if v is None else str(v) for v in values], pa.string())


def prediction_origin(value: bytes) -> Origin | None:
    """(topic, partition, offset) of the input message an Arrow prediction message answers."""
    try:
        table = read_stream(value)
        first = {name: table.column(name)[0].as_py() for name in ("topic", "partition", "offset")}
        return first["topic"], first["partition"], first["offset"]
    except (pa.ArrowException, OSError, ValueError, KeyError, IndexError):
        return None
