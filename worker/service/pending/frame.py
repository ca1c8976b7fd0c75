"""Named numpy arrays and a JSON header as one compressed frame, read back strictly; never pickle.

Layout (integers little-endian; the frame is ``nbstream.persistence.framing``'s)::

    b"NBPF", uint8 format version, uint32 header length, the header (UTF-8 JSON), the body

The header: {"compression": "zstd" or "none", "arrays": [[name, dtype, shape], ...], "meta": {...}}.
The body: the arrays' bytes (C order) one after another, compressed as one zstd frame by
pyarrow's codec. A body that zstd would make more than ``MOST_EXPANSION`` times smaller is stored
as it is, so that a reader refuses, before allocating anything, a header asking for more than
that many times the bytes it came with: forged bytes cannot make it allocate much more than
they weigh, nor read past their end.

Arrays are rebuilt only in plain numeric dtypes, bool, and UTF-32 strings (checked to be code
points); every failure is a ValueError of one line.
"""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np

from nbstream.persistence.framing import Framing, compress, decompress
from nbstream.utils.checked import integer, shown
from nbstream.utils.ndarrays import AnyArray

VERSION = 1
PENDING_FRAME = Framing(b"NBPF", "not a frame of pending examples", "frame of pending examples", versions=(VERSION,))
MOST_EXPANSION = 256
MOST_ARRAYS = 256
LONGEST_STRING = 4_096  # code points of one string label
_NUMERIC = {"<f8", "<f4", "<i8", "<i4", "<u8", "<u4", "<i2", "<u2", "|i1", "|u1", "|b1"}
_STRINGS = re.compile(r"<U([1-9][0-9]{0,3})")
_ZSTD_LEVEL = 1  # the fastest: a commit compresses what came since the last one, twice a second


def pack(meta: dict[str, Any], arrays: dict[str, AnyArray]) -> bytes:
    """The frame of ``meta`` (JSON values) and ``arrays`` (dtypes as ``unpack`` allows them)."""
    for name, array in arrays.items():
        if not (array.dtype.str in _NUMERIC or _STRINGS.fullmatch(array.dtype.str)) or not 1 <= array.ndim <= 2:
            raise ValueError(f"{name}: a frame holds 1-D or 2-D arrays of numbers or strings; got {array.dtype} "
                             f"of {array.ndim} dimensions")
    listed = [[name, array.dtype.str, list(array.shape)] for name, array in arrays.items()]
    raw = b"".join(_bytes_of(array) for array in arrays.values())
    body = compress(raw, _ZSTD_LEVEL) if raw else b""
    compression = "zstd"
    if len(raw) > MOST_EXPANSION * len(body):
        body, compression = raw, "none"
    return PENDING_FRAME.seal({"compression": compression, "arrays": listed, "meta": meta}, [body], VERSION)


def unpack(data: bytes, what: str) -> tuple[dict[str, Any], dict[str, AnyArray]]:
    """(meta, arrays) of a frame ``pack`` wrote; ``what`` names the frame in errors. Arrays are
    read-only. Raises ValueError for anything else."""
    opened = PENDING_FRAME.open(data, what)
    header, body = _header(opened.header, what), opened.body
    listed = _listed(header["arrays"], what)
    raw = _raw(body, header["compression"], sum(size for _, _, _, size in listed), what)
    arrays, start = {}, 0
    for name, dtype, shape, size in listed:
        array = np.frombuffer(raw, dtype=dtype, count=size // dtype.itemsize, offset=start).reshape(shape)
        if dtype.kind == "U":
            _check_code_points(array, f"{what}: {name}")
        arrays[name] = array
        start += size
    return header["meta"], arrays


def _header(header: dict[str, Any], what: str) -> dict[str, Any]:
    if set(header) != {"compression", "arrays", "meta"}:
        raise ValueError(f"{what}: the header must be an object of compression, arrays and meta; got {shown(header)}")
    if header["compression"] not in ("zstd", "none"):
        raise ValueError(f"{what}: compression must be zstd or none; got {shown(header['compression'])}")
    if not isinstance(header["meta"], dict):
        raise ValueError(f"{what}: meta must be an object; got {shown(header['meta'])}")
    return header


def _listed(arrays: object, what: str) -> list[tuple[str, np.dtype[Any], tuple[int, ...], int]]:
    """(name, dtype, shape, bytes) of each array the header lists, checked."""
    if not isinstance(arrays, list) or len(arrays) > MOST_ARRAYS:
        raise ValueError(f"{what}: arrays must be a list of at most {MOST_ARRAYS} entries; got {shown(arrays)}")
    listed, names = [], set()
    for entry in arrays:
        if not (isinstance(entry, list) and len(entry) == 3 and isinstance(entry[0], str)
                and isinstance(entry[1], str) and isinstance(entry[2], list) and 1 <= len(entry[2]) <= 2):
            raise ValueError(f"{what}: each array must be [name, dtype, shape of 1 or 2 sizes]; got {shown(entry)}")
        name, dtype_text, sizes = entry
        if name in names:
            raise ValueError(f"{what}: array {shown(name)} is listed twice")
        names.add(name)
        dtype = _dtype(dtype_text, f"{what}: {name}")
        shape = tuple(integer(size, f"{what}: a size of {name}", 0, 1 << 40) for size in sizes)
        listed.append((name, dtype, shape, math.prod(shape) * dtype.itemsize))
    return listed


def _dtype(text: str, what: str) -> np.dtype[Any]:
    strings = _STRINGS.fullmatch(text)
    if text in _NUMERIC or (strings and int(strings.group(1)) <= LONGEST_STRING):
        return np.dtype(text)
    raise ValueError(f"{what}: dtype {shown(text)} is not one of {sorted(_NUMERIC)} or <U1 to <U{LONGEST_STRING}")


def _raw(body: memoryview, compression: str, size: int, what: str) -> bytes | memoryview:
    """The body's bytes, ``size`` of them, after checking it can hold them."""
    if compression == "none":
        if len(body) != size:
            raise ValueError(f"{what}: its arrays take {size:,} bytes; the body holds {len(body):,}")
        return body
    if size > MOST_EXPANSION * len(body) or (size == 0) != (len(body) == 0):
        raise ValueError(f"{what}: its arrays take {size:,} bytes, which {len(body):,} compressed bytes cannot hold")
    if not size:
        return b""
    return decompress(body, size, exact=size, what=what)


def _check_code_points(array: AnyArray, what: str) -> None:
    points = array.view(np.uint32)
    if ((points > 0x10FFFF) | ((points >= 0xD800) & (points <= 0xDFFF))).any():
        raise ValueError(f"{what}: the strings hold values that are not Unicode code points")


def _bytes_of(array: np.ndarray) -> memoryview:
    """The array's bytes in C order, without a copy where it is contiguous (empty shapes too, such
    as the (n, 0) probabilities served before the model knew a class)."""
    return np.ascontiguousarray(array).reshape(-1).view(np.uint8).data
