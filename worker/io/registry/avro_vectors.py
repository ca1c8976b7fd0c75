"""The plans of Avro records the fast paths read (``avro_columns``), and the items of arrays of
numbers (MNIST-like rows), decoded a poll at a time.

fastavro makes a Python int per array item, and Arrow converts them back (docs/performance.md,
scripts/bench_avro.py). Here every array item of every record is decoded at
once with numpy: an Avro int or long is a zigzag varint, whose last byte is the only one below
0x80, so the items' ends are found in one pass over the buffer, and their values in a pass per
byte they take (two for pixels). A float or double array is copied as it is.

A record takes the fast path when its writer schema is a record of scalar fields (null, boolean,
int, long, float, double, string, bytes, an enum, a union of those; no logical type), beside (for
vectors) the features field, an array of int, long, float or double (or a union of null and such
an array, as a nullable Parquet column becomes) written in one block, as every Avro library
writes it. Any other record, or any doubt, sends the whole poll the general way (``records.py``),
where each problem gets its name.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeAlias

import numpy as np
import numpy.typing as npt

from nbstream.utils.ndarrays import FloatArray, IntArray

NULL, BOOLEAN, VARINT, FLOAT, DOUBLE, STRING, BYTES, ENUM, UNION = range(9)
SCALARS = {"null": NULL, "boolean": BOOLEAN, "int": VARINT, "long": VARINT, "float": FLOAT,
            "double": DOUBLE, "string": STRING, "bytes": BYTES}
_ITEM_BYTES = {"int": 5, "long": 10}  # the longest varint of each
_FIXED_ITEMS: dict[str, np.dtype] = {"float": np.dtype("<f4"), "double": np.dtype("<f8")}
# How a scalar field is read: (kind, detail), detail None, an enum's symbols, or a union's
# branches (each a ScalarReader)
ScalarReader: TypeAlias = tuple[int, Any]
ByteArray: TypeAlias = npt.NDArray[np.uint8]  # a buffer's bytes
FieldReaders: TypeAlias = tuple[tuple[str, ScalarReader], ...]  # (name, reader) of each field, in order


@dataclass(frozen=True)
class VectorPlan:
    """How a writer schema's records are read on the fast path: the scalar fields before the
    features array and after it, each (name, reader), and the array's item type."""
    before: FieldReaders
    after: FieldReaders
    items: str
    branch: int | None = None  # where the array is a union's branch (a nullable column), its index


def vector_plan(schema: dict[str, Any], features: str) -> VectorPlan | None:
    """The plan for records of a parsed Avro record schema, or None when they cannot take the fast path."""
    names = [field["name"] for field in schema["fields"]]
    if names.count(features) != 1:
        return None
    array = schema["fields"][names.index(features)]["type"]
    branch = None
    if isinstance(array, list) and len(array) == 2 and "null" in array:  # ["null", array]: a nullable column
        branch = 1 - array.index("null")
        array = array[branch]
    items = array.get("items") if isinstance(array, dict) and array.get("type") == "array" else None
    if items not in ("int", "long", "float", "double"):
        return None
    readers = []
    for field in schema["fields"]:
        if field["name"] != features:
            reader = _reader(field["type"])
            if reader is None:
                return None
            readers.append((field["name"], reader))
    at = names.index(features)
    return VectorPlan(tuple(readers[:at]), tuple(readers[at:]), items, branch)


def scalar_plan(schema: dict[str, Any]) -> FieldReaders | None:
    """(name, reader) of every field of a parsed Avro record schema of scalar fields (the plan
    ``avro_columns`` reads its records by), or None when a field is not a scalar."""
    readers = []
    for field in schema["fields"]:
        reader = _reader(field["type"])
        if reader is None:
            return None
        readers.append((field["name"], reader))
    return tuple(readers)


def _reader(avro_type: object) -> ScalarReader | None:
    """(kind, detail) of a scalar type, or None for any other."""
    if isinstance(avro_type, str):
        return (SCALARS[avro_type], None) if avro_type in SCALARS else None
    if isinstance(avro_type, list):
        branches = [_reader(branch) for branch in avro_type]
        return None if any(b is None or b[0] == UNION for b in branches) else (UNION, tuple(branches))
    if not isinstance(avro_type, dict) or "logicalType" in avro_type:
        return None
    if avro_type.get("type") == "enum":
        return ENUM, tuple(avro_type["symbols"])
    return _reader(avro_type.get("type"))


def array_items(buffer: bytes, array_at: IntArray, counts: IntArray, items: str
           ) -> tuple[FloatArray | None, IntArray]:
    """(every record's array items in one float64 array, the position just past each array's
    items); (None, ...) when they run past the buffer or a varint is too long for its type."""
    data = np.frombuffer(buffer, dtype=np.uint8)
    if items in _FIXED_ITEMS:
        dtype = _FIXED_ITEMS[items]
        array_ends = array_at + counts * dtype.itemsize
        if (array_ends > len(data)).any():
            return None, array_ends
        parts = [data[a:e].view(dtype) for a, e in zip(array_at.tolist(), array_ends.tolist(), strict=True)]
        return np.concatenate(parts).astype(np.float64), array_ends
    # Zigzag varints. Within an array every byte belongs to one, and only a varint's last byte is
    # below 0x80; the byte before an array's first item is its count's last byte.
    last_bytes = np.flatnonzero(data < 0x80)
    first = np.searchsorted(last_bytes, array_at)  # each array's first item, as an index into last_bytes
    if (first + counts > len(last_bytes)).any():
        return None, array_at
    array_ends = np.where(counts > 0, last_bytes[np.minimum(first + counts, len(last_bytes)) - 1] + 1, array_at)
    before = np.cumsum(counts) - counts  # items of the arrays before each one
    item_ends = last_bytes[np.arange(int(counts.sum())) + np.repeat(first - before, counts)]
    raw = _varints(data, item_ends, _ITEM_BYTES[items])
    if raw is None:
        return None, array_ends
    signed = (raw.view(np.uint64) >> np.uint64(1)).view(np.int64) ^ -(raw & 1)  # zigzag
    if items == "int" and len(signed) and (signed.min() < -2**31 or signed.max() >= 2**31):
        return None, array_ends
    return signed.astype(np.float64), array_ends


def _varints(data: ByteArray, ends: IntArray, longest: int) -> IntArray | None:
    """(n,) the unsigned varints (64 bits, as int64) whose last bytes are data[ends], each preceded
    by a byte below 0x80; None if one is longer than ``longest`` bytes. Most take a byte or two (values
    below 2**14): they cost a pass each, and only the longer ones more."""
    raw: IntArray = data[ends].astype(np.int64)
    before = data[ends - 1]
    longer = np.flatnonzero(before >= 0x80)  # the items of two bytes or more
    raw[longer] = (raw[longer] << 7) | (before[longer] & 0x7F)
    for back in range(2, longest + 1):
        if not len(longer):
            return raw
        byte = data[ends[longer] - back]
        going_on = byte >= 0x80
        longer, byte = longer[going_on], byte[going_on]
        if back == longest and len(longer):
            return None
        # the bytes come most significant first when read backwards; shifting wraps at 64 bits as the format does
        raw[longer] = ((raw[longer].view(np.uint64) << np.uint64(7)) | (byte & 0x7F)).view(np.int64)
    return raw
