"""Avro records read a field at a time across a whole poll, with numpy: records of scalar fields
(text, label, id: SMS-like rows) into Arrow columns, and the scalars beside an array of numbers
(MNIST-like rows: ``avro_vectors`` reads the array).

Avro writes a record's fields one after another with no index, so record i's field k starts
where its field k - 1 ends. Reading field k for every record at once keeps those positions in one
array and moves them all: a varint (int, long, a union's branch, an enum's index, a string's
length) is read a byte-pass at a time over the records whose varint goes on; a string's bytes are
gathered into one Arrow buffer by index arithmetic, not copied record by record; a union splits the
records by branch. A poll of 10,000 SMS records takes some tens of numpy calls per field, where
reading record by record takes Python calls per field of each record.

Every position is checked against its record's end as it moves; anything out of place (a byte
beyond its record, a branch or symbol out of range, a varint too long, invalid UTF-8, records
not ending where they should) gives None, and the poll is read the slower ways.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from nbstream.utils.ndarrays import AnyArray, BoolArray, IntArray

from ..json_vectors import Vectors
from ..records import FieldValue
from .avro_vectors import (
    BOOLEAN,
    BYTES,
    DOUBLE,
    ENUM,
    FLOAT,
    NULL,
    STRING,
    UNION,
    VARINT,
    ByteArray,
    FieldReaders,
    VectorPlan,
    array_items,
)

LONGEST_VARINT = 10


class _Refused(Exception):
    """A poll the column reader leaves to the other ways."""


class _Column:
    """The values one field gave a poll's records: its kind (None until a record gives one) and,
    per kind, the rows and their values."""

    def __init__(self, n: int):
        self.n = n
        self.kinds: set[int] = set()
        self.rows: list[IntArray] = []
        # per part: an array of numbers or symbols, or (starts, ends) of strings
        self.values: list[AnyArray | tuple[IntArray, IntArray]] = []

    def add(self, kind: int, rows: IntArray, values: AnyArray | tuple[IntArray, IntArray]) -> None:
        if len(rows):
            self.kinds.add(kind)
            self.rows.append(rows)
            self.values.append(values)

    def array(self, data: ByteArray) -> pa.Array | None:
        """The column as an Arrow array of n rows (nulls where no value), or None for a column of
        more than one kind (a union of long and string, say), of bytes, or of no value at all."""
        if len(self.kinds) != 1:
            return pa.nulls(self.n) if not self.kinds else None
        kind = next(iter(self.kinds))
        rows = np.concatenate(self.rows)
        valid = np.zeros(self.n, dtype=bool)
        valid[rows] = True
        if kind == STRING:
            starts, ends = np.zeros(self.n, np.int64), np.zeros(self.n, np.int64)
            starts[rows] = np.concatenate([s for s, _ in self.values])
            ends[rows] = np.concatenate([e for _, e in self.values])
            return _strings(data, starts, ends, valid)
        if kind == BYTES:
            return None  # an id or a label a JSON prediction cannot carry: named the general way
        values = np.empty(self.n, dtype=object if kind == ENUM else np.float64 if kind in (FLOAT, DOUBLE) else
                          bool if kind == BOOLEAN else np.int64)
        values[rows] = np.concatenate(self.values)
        return pa.array(values, mask=~valid, type=pa.string() if kind == ENUM else None)

    def to_list(self, data: ByteArray) -> list[FieldValue] | None:
        """The column as a list of n Python values (None where no value), of any kinds but bytes;
        None where one is bytes or a string is not UTF-8."""
        if BYTES in self.kinds:
            return None
        if len(self.kinds) < 2:
            array = self.array(data)
            return None if array is None else array.to_pylist()
        found: list[FieldValue] = [None] * self.n
        try:
            for rows, part in zip(self.rows, self.values, strict=True):
                if isinstance(part, tuple):  # strings: (starts, ends)
                    values = [data[s:e].tobytes().decode() for s, e in zip(*(v.tolist() for v in part), strict=True)]
                else:
                    values = part.tolist()
                for row, value in zip(rows.tolist(), values, strict=True):
                    found[row] = value
        except UnicodeDecodeError:
            return None
        return found


def read_columns(buffer: bytes, begins: IntArray, ends: IntArray, plan: FieldReaders, wanted: tuple[str, ...]
                 ) -> dict[str, pa.Array] | None:
    """The ``wanted`` fields (those the plan has) of the records at buffer[begins[i]:ends[i]], all
    written with the schema of ``plan`` (``avro_vectors.scalar_plan``); None for any doubt."""
    data = np.frombuffer(buffer, dtype=np.uint8)
    at, ends = begins.astype(np.int64), ends.astype(np.int64)
    found: dict[str, _Column] = {}
    try:
        _read_fields(data, at, ends, np.arange(len(at)), plan, found)
    except _Refused:
        return None
    if not (at == ends).all():
        return None
    columns = {name: found[name].array(data) for name in wanted if name in found}
    return None if any(column is None for column in columns.values()) else columns


def read_vector_columns(buffer: bytes, begins: IntArray, ends: IntArray, plan: VectorPlan, label: str,
                        id_field: str) -> Vectors | None:
    """The features, labels and ids of records all written with the schema of ``plan`` (an array
    of numbers among scalar fields): the scalars a field at a time, the array's items at once
    (``avro_vectors.array_items``); None for any doubt."""
    data = np.frombuffer(buffer, dtype=np.uint8)
    at, ends = begins.astype(np.int64), ends.astype(np.int64)
    everyone = np.arange(len(at))
    found: dict[str, _Column] = {}
    try:
        _read_fields(data, at, ends, everyone, plan.before, found)
        if plan.branch is not None and (_varints(data, at, ends, everyone) != plan.branch).any():
            return None  # a null array: the general way names the problem
        counts = _varints(data, at, ends, everyone)
        if counts.min() < 0:  # blocks that give their size in bytes: written by some, not by these
            return None
        values, array_ends = array_items(buffer, at.copy(), counts, plan.items)
        filled = counts > 0
        # A non-empty array is one block: its count, its items and a 0; an empty one is the 0 alone.
        if values is None or (array_ends[filled] + 1 > ends[filled]).any() or data[array_ends[filled]].any():
            return None
        at[filled] = array_ends[filled] + 1
        _read_fields(data, at, ends, everyone, plan.after, found)
    except _Refused:
        return None
    if not (at == ends).all():
        return None
    labels, ids = (found[name].to_list(data) if name in found else [None] * len(at) for name in (label, id_field))
    if labels is None or ids is None:
        return None
    offsets = np.zeros(len(at) + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    if offsets[-1] >= 2**31:
        return None
    return Vectors(offsets.astype(np.int32), values, labels, ids)


def _read_fields(data: ByteArray, at: IntArray, ends: IntArray, rows: IntArray, fields: FieldReaders,
                 into: dict[str, _Column]) -> None:
    for name, (kind, detail) in fields:
        into[name] = _Column(len(at))
        _read(data, at, ends, rows, kind, detail, into[name])


def _read(data: ByteArray, at: IntArray, ends: IntArray, rows: IntArray, kind: int, detail: Any,
          column: _Column) -> None:
    """Read one field of kind ``kind`` in the records ``rows``, moving their positions ``at``."""
    if not len(rows) or kind == NULL:
        return
    if kind == UNION:
        branches = _varints(data, at, ends, rows)
        if branches.min() < 0 or branches.max() >= len(detail):
            raise _Refused
        for branch, (branch_kind, branch_detail) in enumerate(detail):
            _read(data, at, ends, rows[branches == branch], branch_kind, branch_detail, column)
        return
    if kind in (VARINT, ENUM):
        values: AnyArray = _varints(data, at, ends, rows)  # varints, enum symbols, or booleans as bytes
        if kind == ENUM:
            if values.min() < 0 or values.max() >= len(detail):
                raise _Refused
            values = np.array(detail, dtype=object)[values]
        column.add(kind, rows, values)
    elif kind == BOOLEAN:
        _within(at[rows] + 1, ends[rows])
        values = data[at[rows]]
        if values.max() > 1:
            raise _Refused
        at[rows] += 1
        column.add(kind, rows, values.astype(bool))
    elif kind in (FLOAT, DOUBLE):
        size = 4 if kind == FLOAT else 8
        _within(at[rows] + size, ends[rows])
        raw = data[at[rows][:, None] + np.arange(size)]
        at[rows] += size
        column.add(kind, rows, raw.copy().view("<f4" if kind == FLOAT else "<f8").ravel().astype(np.float64))
    else:  # STRING, BYTES
        sizes = _varints(data, at, ends, rows)
        if sizes.min() < 0:
            raise _Refused
        starts = at[rows].copy()
        _within(starts + sizes, ends[rows])
        at[rows] = starts + sizes
        column.add(kind, rows, (starts, starts + sizes))


def _varints(data: ByteArray, at: IntArray, ends: IntArray, rows: IntArray) -> IntArray:
    """The zigzag varints at the positions of ``rows``, read a byte-pass at a time; moves the positions."""
    raw = np.zeros(len(rows), dtype=np.uint64)
    going = np.arange(len(rows))
    for shift in range(0, 7 * LONGEST_VARINT, 7):
        positions = at[rows[going]]
        _within(positions + 1, ends[rows[going]])
        byte = data[positions]
        raw[going] |= (byte & 0x7F).astype(np.uint64) << np.uint64(shift)
        at[rows[going]] = positions + 1
        going = going[byte >= 0x80]
        if not len(going):
            return (raw >> np.uint64(1)).view(np.int64) ^ -(raw & np.uint64(1)).view(np.int64)
    raise _Refused


def _within(positions: IntArray, ends: IntArray) -> None:
    if (positions > ends).any():
        raise _Refused


def _strings(data: ByteArray, starts: IntArray, ends: IntArray, valid: BoolArray) -> pa.Array | None:
    """A string array of data[starts[i]:ends[i]] (null where not valid), gathered at once; None for
    invalid UTF-8 or more than 2 GiB of text."""
    sizes = np.where(valid, ends - starts, 0)
    offsets = np.zeros(len(sizes) + 1, dtype=np.int64)
    np.cumsum(sizes, out=offsets[1:])
    if offsets[-1] >= 2**31:
        return None
    gather = np.repeat(starts - offsets[:-1], sizes) + np.arange(offsets[-1])
    bitmap = pa.array(valid, type=pa.bool_()).buffers()[1]
    strings = pa.StringArray.from_buffers(len(sizes), pa.py_buffer(offsets.astype(np.int32)),
                                          pa.py_buffer(data[gather].tobytes()), bitmap, int((~valid).sum()))
    try:
        strings.validate(full=True)
    except pa.ArrowInvalid:
        return None
    return strings
