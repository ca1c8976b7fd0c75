"""The tensors of an inference request, read from its body: JSON, or JSON followed by the binary
tensor data of the protocol's binary extension (what tritonclient sends by default).

A body is ``{"id": ..., "parameters": {...}, "inputs": [TENSOR, ...], "outputs": [{"name": ...}, ...]}``,
each TENSOR ``{"name", "datatype", "shape", "data"}`` where data is the row-major values (flat or
nested), or, with the binary extension, ``"parameters": {"binary_data_size": n}`` and n bytes of the
part after the JSON (whose length the ``Inference-Header-Content-Length`` header gives): numbers
little-endian, BYTES as each element's 4-byte little-endian length followed by its bytes.
"""

from __future__ import annotations

import math
import struct
import threading
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import simdjson

from .errors import RequestError

NUMERIC_DATATYPES: dict[str, np.dtype[Any]] = {name: np.dtype(kind) for name, kind in (
    ("BOOL", "bool"), ("UINT8", "<u1"), ("UINT16", "<u2"), ("UINT32", "<u4"), ("UINT64", "<u8"),
    ("INT8", "<i1"), ("INT16", "<i2"), ("INT32", "<i4"), ("INT64", "<i8"),
    ("FP16", "<f2"), ("FP32", "<f4"), ("FP64", "<f8"))}
BYTES = "BYTES"
_LENGTH = struct.Struct("<I")


@dataclass(frozen=True)
class Tensor:
    """One input: its values as an Arrow array (strings for BYTES, numbers else) of
    prod(shape) elements in row-major order, and its shape."""
    name: str
    datatype: str
    shape: tuple[int, ...]
    values: pa.Array


@dataclass(frozen=True)
class InferRequest:
    """What an infer request asks. outputs : the names asked for (empty: every output)."""
    id: str | None
    inputs: dict[str, Tensor]
    outputs: tuple[str, ...]
    parameters: dict[str, Any] = field(default_factory=dict)


def read_request(body: bytes, header_length: str | None, max_rows: int) -> InferRequest:
    """The request a body holds (RequestError, one line, when it holds none).

    header_length : the ``Inference-Header-Content-Length`` header (None: the body is JSON only)
    max_rows : the most rows (first dimension) an input may have

    simdjson reads the JSON: numbers go straight into arrays, with no Python object each."""
    json_part, binary = _split(body, header_length)
    try:
        document = _parse(json_part)
    except (ValueError, RuntimeError) as error:  # (UnicodeDecodeError is a ValueError)
        raise RequestError(f"the request is not JSON ({_first_line(error)}).") from None
    if not isinstance(document, simdjson.Object):
        raise RequestError("the request must be a JSON object.")
    parameters = _plain(document.get("parameters"), "the request's parameters")
    request_id = document.get("id")
    if request_id is not None and not isinstance(request_id, str):
        raise RequestError("the request's id must be a string.")
    inputs = document.get("inputs")
    if not isinstance(inputs, simdjson.Array) or not len(inputs):
        raise RequestError("the request has no inputs: give a list of tensors under \"inputs\".")
    tensors: dict[str, Tensor] = {}
    offset = 0
    for entry in inputs:
        tensor, offset = _tensor(entry, binary, offset, max_rows)
        if tensor.name in tensors:
            raise RequestError(f"the input {tensor.name!r} is given twice.")
        tensors[tensor.name] = tensor
    if offset != len(binary):
        raise RequestError(f"the binary part has {len(binary) - offset} bytes that no input claims.")
    outputs = _asked_outputs(_plain_value(document.get("outputs")))
    return InferRequest(request_id, tensors, outputs, parameters)


_parsers = threading.local()


def _parse(json_part: bytes) -> object:
    """The document, parsed by this thread's parser: one made for each request would cost as much
    again in allocating its buffers as the parse itself. A parser parses again only once no value
    read from its last document is left; one may be, held by the traceback of a request refused
    (until a collection frees it), and then a new parser takes over."""
    parser: simdjson.Parser | None = getattr(_parsers, "parser", None)
    if parser is not None:
        try:
            document: object = parser.parse(json_part)
            return document
        except RuntimeError as error:
            if "re-use" not in str(error):
                raise
    _parsers.parser = parser = simdjson.Parser()
    fresh: object = parser.parse(json_part)
    return fresh


def _first_line(error: Exception) -> str:
    return str(error).split("\n")[0][:200]


def _plain_value(value: object) -> object:
    """A simdjson value as Python's (objects and arrays made dicts and lists)."""
    if isinstance(value, simdjson.Object):
        return value.as_dict()
    if isinstance(value, simdjson.Array):
        return value.as_list()
    return value


def _plain(value: object, what: str) -> dict[str, Any]:
    """A JSON object's parameters (null, or none given: none)."""
    return {} if value is None else _object(_plain_value(value), what)


def _split(body: bytes, header_length: str | None) -> tuple[bytes, bytes]:
    if header_length is None:
        return body, b""
    try:
        length = int(header_length)
    except ValueError:
        raise RequestError(f"Inference-Header-Content-Length is not a number ({header_length[:40]!r}).") from None
    if not 0 <= length <= len(body):
        raise RequestError(f"Inference-Header-Content-Length {length} is beyond the body's {len(body)} bytes.")
    return body[:length], body[length:]


def _object(value: object, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise RequestError(f"{what} must be a JSON object.")
    return value


def _asked_outputs(outputs: object) -> tuple[str, ...]:
    if outputs is None:
        return ()
    if not isinstance(outputs, list) or not all(isinstance(o, dict) and isinstance(o.get("name"), str)
                                                for o in outputs):
        raise RequestError("\"outputs\" must be a list of objects, each with a \"name\".")
    return tuple(output["name"] for output in outputs)


def _tensor(entry: object, binary: bytes, offset: int, max_rows: int) -> tuple[Tensor, int]:
    """The tensor an input entry describes, and where the next binary tensor starts."""
    if not isinstance(entry, simdjson.Object):
        raise RequestError("each input must be a JSON object.")
    name, datatype, shape = entry.get("name"), entry.get("datatype"), _plain_value(entry.get("shape"))
    if not isinstance(name, str):
        raise RequestError("each input needs a \"name\" (a string).")
    if datatype != BYTES and datatype not in NUMERIC_DATATYPES:
        raise RequestError(f"input {name!r}: datatype {str(datatype)[:40]!r} is not one of the protocol's "
                           f"({', '.join([*NUMERIC_DATATYPES, BYTES])}).")
    if not isinstance(shape, list) or not shape or not all(type(d) is int and d >= 0 for d in shape):
        raise RequestError(f"input {name!r}: \"shape\" must be a list of sizes (integers >= 0).")
    if shape[0] > max_rows:
        raise RequestError(f"input {name!r} has {shape[0]} rows; this server answers at most {max_rows} "
                           f"a request (--http-max-rows).", 413)
    count = math.prod(shape)
    if datatype == BYTES and count > max_rows:  # a text or category per row: [N] or [N, 1]
        raise RequestError(f"input {name!r}: {count} BYTES values; this server takes one a row, at most "
                           f"{max_rows} (--http-max-rows).", 413)
    size = _plain(entry.get("parameters"), f"input {name!r}'s parameters").get("binary_data_size")
    if size is not None:
        if type(size) is not int or not 0 <= size <= len(binary) - offset:
            raise RequestError(f"input {name!r}: binary_data_size {size!r} is beyond the binary part.")
        raw = binary[offset:offset + size]
        values = _binary_strings(raw, count, name) if datatype == BYTES else _binary_numbers(raw, datatype, count, name)
        return Tensor(name, datatype, tuple(shape), values), offset + size
    if "data" not in entry:
        raise RequestError(f"input {name!r} has neither \"data\" nor binary_data_size.")
    return Tensor(name, datatype, tuple(shape), _json_values(entry["data"], datatype, shape, name)), offset


def _binary_numbers(raw: bytes, datatype: str, count: int, name: str) -> pa.Array:
    dtype = NUMERIC_DATATYPES[datatype]
    if len(raw) != count * dtype.itemsize:
        raise RequestError(f"input {name!r}: {len(raw)} bytes of {datatype} for a shape of {count} values.")
    return pa.array(np.frombuffer(raw, dtype=dtype))


def _binary_strings(raw: bytes, count: int, name: str) -> pa.Array:
    """BYTES elements as an Arrow string array over the raw bytes (UTF-8 is checked where the
    values are used, naming the row)."""
    offsets, pieces, position = [0], [], 0
    for _ in range(count):
        if position + 4 > len(raw):
            raise RequestError(f"input {name!r}: the binary data ends before its {count} elements.")
        (length,) = _LENGTH.unpack_from(raw, position)
        position += 4
        if position + length > len(raw):
            raise RequestError(f"input {name!r}: an element of {length} bytes runs past the binary data.")
        pieces.append(raw[position:position + length])
        position += length
        offsets.append(offsets[-1] + length)
    if position != len(raw):
        raise RequestError(f"input {name!r}: {len(raw) - position} bytes follow its {count} elements.")
    data = b"".join(pieces)
    return pa.Array.from_buffers(pa.large_string(), count,
                                 [None, pa.py_buffer(np.asarray(offsets, dtype=np.int64)), pa.py_buffer(data)])


def _json_values(data: object, datatype: str, shape: list[int], name: str) -> pa.Array:
    """The values of a "data" list, flat or nested (read row-major), of a tensor of ``shape``. Its
    length is checked before its values are read: a list that cannot fit costs nothing."""
    count = math.prod(shape)
    if not isinstance(data, simdjson.Array):
        raise RequestError(f"input {name!r}: \"data\" must be a list of its values.")
    if len(data) not in (count, shape[0]):  # flat, or nested a row per item
        raise RequestError(f"input {name!r}: {len(data)} values for a shape of {count}.")
    if datatype == BYTES or datatype == "BOOL":
        return _json_objects(_flattened(data.as_list()), datatype, count, name)
    dtype = NUMERIC_DATATYPES[datatype]
    try:
        if dtype.kind == "f":
            values = np.frombuffer(data.as_buffer(of_type="d"), dtype=np.float64)
        elif dtype == np.uint64:
            values = np.frombuffer(data.as_buffer(of_type="u"), dtype=np.uint64)
        else:
            values = np.frombuffer(data.as_buffer(of_type="i"), dtype=np.int64)
    except (TypeError, ValueError) as error:
        raise RequestError(f"input {name!r}: {datatype} values must be numbers of that type "
                           f"({_first_line(error)}).") from None
    if len(values) != count:
        raise RequestError(f"input {name!r}: {len(values)} values for a shape of {count}.")
    if dtype.kind in "iu" and len(values) and not (np.iinfo(dtype).min <= values.min() and
                                                   values.max() <= np.iinfo(dtype).max):
        raise RequestError(f"input {name!r}: a value does not fit {datatype}.")
    return pa.array(values.astype(dtype, copy=False))


def _json_objects(flat: list[Any], datatype: str, count: int, name: str) -> pa.Array:
    """BYTES (JSON strings) or BOOL values."""
    if len(flat) != count:
        raise RequestError(f"input {name!r}: {len(flat)} values for a shape of {count}.")
    if datatype == BYTES:
        if not all(isinstance(value, str) for value in flat):
            raise RequestError(f"input {name!r}: BYTES values in JSON must be strings.")
        return pa.array(flat, type=pa.large_string())
    if not all(isinstance(value, bool) for value in flat):
        raise RequestError(f"input {name!r}: BOOL values must be true or false.")
    return pa.array(flat, type=pa.bool_())


def _flattened(data: list[Any]) -> list[Any]:
    """Row-major values of nested lists (a flat list as it is)."""
    if not any(isinstance(item, list) for item in data):
        return data
    flat: list[Any] = []
    stack: list[Any] = [iter(data)]
    while stack:
        for item in stack[-1]:
            if isinstance(item, list):
                stack.append(iter(item))
                break
            flat.append(item)
        else:
            stack.pop()
    return flat
