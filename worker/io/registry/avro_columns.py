"""Avro records of scalar fields (text, label, id: SMS-like rows) read a field at a time across a
whole poll, with numpy, into Arrow columns.

Avro writes a record's fields one after another with no index, so record i's field k starts
where its field k - 1 ends. Reading field k for every record at once keeps those positions in one
array and moves them all: a varint (int, long, a union's branch, an enum's index, a string's
length) is read a byte-pass at a time over the records whose varint goes on; a string's bytes are
gathered into one Arrow buffer by index arithmetic, not copied record by record; a union splits the
records by branch. A poll of 10,000 SMS records takes some tens of numpy calls per field, where
reading them one by one (``avro_vectors.read_scalars``) takes Python calls per record.

Every position is checked against its record's end as it moves; anything out of place (a byte
beyond its record, a branch or symbol out of range, a varint too long, invalid UTF-8, records
not ending where they should) gives None, and the poll is read the slower ways.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from .avro_vectors import BOOLEAN, BYTES, DOUBLE, ENUM, FLOAT, NULL, STRING, UNION, VARINT

LONGEST_VARINT = 10


class _Refused(Exception):
    """A poll the column reader leaves to the other ways."""


class _Column:
    """The values one field gave a poll's records: its kind (None until a record gives one) and,
    per kind, the rows and their values."""

    def __init__(self, n: int):
        self.n = n
        self.kinds: set[int] = set()
        self.rows: list[np.ndarray] = []
        self.values: list = []  # per part: an array of numbers, or (starts, ends) of strings, or symbols

    def add(self, kind: int, rows: np.ndarray, values) -> None:
        if len(rows):
            self.kinds.add(kind)
            self.rows.append(rows)
            self.values.append(values)

    def array(self, data: np.ndarray) -> pa.Array | None:
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


def read_columns(buffer: bytes, begins: np.ndarray, ends: np.ndarray, plan: tuple, wanted: tuple[str, ...]
                 ) -> dict[str, pa.Array] | None:
    """The ``wanted`` fields (those the plan has) of the records at buffer[begins[i]:ends[i]], all
    written with the schema of ``plan`` (``avro_vectors.scalar_plan``); None for any doubt."""
    data = np.frombuffer(buffer, dtype=np.uint8)
    at, ends = begins.astype(np.int64), ends.astype(np.int64)
    everyone = np.arange(len(at))
    columns: dict[str, pa.Array] = {}
    try:
        for name, (kind, detail) in plan:
            column = _Column(len(at))
            _read(data, at, ends, everyone, kind, detail, column)
            if name in wanted:
                array = column.array(data)
                if array is None:
                    return None
                columns[name] = array
    except _Refused:
        return None
    return columns if (at == ends).all() else None


def _read(data: np.ndarray, at: np.ndarray, ends: np.ndarray, rows: np.ndarray, kind: int, detail, column: _Column
          ) -> None:
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
        values = _varints(data, at, ends, rows)
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


def _varints(data: np.ndarray, at: np.ndarray, ends: np.ndarray, rows: np.ndarray) -> np.ndarray:
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


def _within(positions: np.ndarray, ends: np.ndarray) -> None:
    if (positions > ends).any():
        raise _Refused


def _strings(data: np.ndarray, starts: np.ndarray, ends: np.ndarray, valid: np.ndarray) -> pa.Array | None:
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
