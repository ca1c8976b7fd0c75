"""Snapshots: one self-describing file per model, written atomically, never pickled.

Layout (all integers little-endian)::

    b"NBSNAP\\x00\\x01"                     magic, with the format version in the last byte
    uint64 header length, header (UTF-8 JSON): kind, parameters, classes, array directory,
                                             examples seen, creation time, caller metadata
    array bytes, each at the offset the directory gives (raw, C order, 8-byte aligned)
    32-byte SHA-256 of everything above

Loading checks the magic, the version and the checksum before it reads anything else, and
rebuilds arrays only from an allow-list of plain numeric dtypes: a snapshot is data, and
loading one never runs code.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import io
import json
import os
import struct
import tempfile
from pathlib import Path

import numpy as np

from .base import NaiveBayes
from .labels import ClassSet
from .registry import model_class

FORMAT_VERSION = 1
_MAGIC = b"NBSNAP\x00"
_ALLOWED_DTYPES = {"<f8", "<f4", "<i8", "<i4", "<u8", "<u4", "<i2", "<u2", "|i1", "|u1", "|b1"}


class SnapshotError(ValueError):
    """The file is not a readable nbstream snapshot (truncated, altered, or another format)."""


def save(model: NaiveBayes, path, meta: dict | None = None) -> Path:
    """Write ``model`` to ``path`` atomically: a reader sees the old file or the new one.

    meta : JSON-serialisable dict stored as is (the worker keeps source positions there).
    """
    header_bytes, arrays = _serialise(model, meta, tables=True)
    return _write_atomically(Path(path), header_bytes, arrays)


def dumps(model: NaiveBayes, meta: dict | None = None, *, tables: bool = True) -> bytes:
    """The snapshot of ``model`` as bytes (the same format as ``save`` writes).

    tables : store the smoothed tables too (then a loaded model predicts bit-identically
        without recomputing them); without them the snapshot holds only the statistics and
        the tables are recomputed on first use.
    """
    header_bytes, arrays = _serialise(model, meta, tables=tables)
    buffer = io.BytesIO()
    _write_body(buffer, header_bytes, arrays)
    return buffer.getvalue()


def _serialise(model: NaiveBayes, meta: dict | None, *, tables: bool) -> tuple[bytes, dict[str, np.ndarray]]:
    model._require_fitted()
    arrays: dict[str, np.ndarray] = {}
    header = {
        "kind": model.kind,
        "params": {name: _encode_value(value, f"param.{name}", arrays)
                   for name, value in model.get_params().items()},
        "classes": _encode_value(model.classes_, "classes", arrays),
        "open_classes": not model._classes.fixed,
        "n_features": model.n_features_in_,
        "examples_seen": int(model.n_examples_seen_),
        "created_at": _dt.datetime.now(_dt.timezone.utc).isoformat(),
        "meta": meta or {},
    }
    for name, array in model._stats.arrays().items():
        arrays[f"stats.{name}"] = array
    if tables:
        for name, value in model._fresh_tables().items():
            _encode_value(value if isinstance(value, list) else np.asarray(value), f"table.{name}", arrays)
    header["arrays"] = []
    offset = 0
    for name, array in arrays.items():
        array = np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("<"))
        arrays[name] = array
        header["arrays"].append({"name": name, "dtype": array.dtype.str, "shape": list(array.shape),
                                 "offset": offset})
        offset += -(-array.nbytes // 8) * 8
    try:
        return json.dumps(header, allow_nan=False).encode(), arrays
    except (TypeError, ValueError) as error:
        raise TypeError(f"snapshot metadata must be JSON-serialisable: {error}") from None


def _write_body(out, header_bytes: bytes, arrays: dict[str, np.ndarray]) -> None:
    """Magic and version, header, arrays, then the SHA-256 of all of it."""
    digest = hashlib.sha256()

    def write(chunk: bytes | memoryview) -> None:
        digest.update(chunk)
        out.write(chunk)

    write(_MAGIC + bytes([FORMAT_VERSION]))
    write(struct.pack("<Q", len(header_bytes)))
    write(header_bytes)
    for array in arrays.values():
        write(memoryview(array.reshape(-1).view(np.uint8)))
        write(b"\x00" * (-array.nbytes % 8))
    out.write(digest.digest())


def _write_atomically(path: Path, header_bytes: bytes, arrays: dict[str, np.ndarray]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as out:
            _write_body(out, header_bytes, arrays)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temp_name, path)
    except BaseException:
        Path(temp_name).unlink(missing_ok=True)
        raise
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)
    return path


def read_header(path) -> dict:
    """The verified header of a snapshot (kind, params, classes, meta, ...) without arrays."""
    header, _ = _read_verified(Path(path))
    return header


def load(path) -> NaiveBayes:
    """Read a snapshot: the model predicts bit-identically and can keep training.

    Raises SnapshotError for a truncated, altered or foreign file.
    """
    return load_with_header(path)[0]


def load_with_header(path) -> tuple[NaiveBayes, dict]:
    """The model and the verified header (with the caller's ``meta``), from one read."""
    return _model_from(*_read_verified(Path(path)), path)


def loads(data: bytes, source: str = "snapshot") -> tuple[NaiveBayes, dict]:
    """The model and header of a snapshot held in memory (see ``dumps``); ``source`` names it in errors."""
    return _model_from(*_verified(data, source), source)


def _model_from(header: dict, payload: memoryview, source) -> tuple[NaiveBayes, dict]:
    try:
        arrays = {entry["name"]: _array_from(payload, entry) for entry in header["arrays"]}
        model = model_class(header["kind"])()
        model.set_params(**{name: _decode_value(value, arrays) for name, value in header["params"].items()})
        fixed = not header["open_classes"]
        model._start(ClassSet(_decode_value(header["classes"], arrays), fixed), header["n_features"])
        stats = {name.removeprefix("stats."): a for name, a in arrays.items() if name.startswith("stats.")}
        model._stats = type(model._stats).from_arrays(stats)
        model.n_examples_seen_ = header["examples_seen"]
        model._tables = _decode_tables(arrays) or None
    except (KeyError, TypeError, ValueError) as error:
        raise SnapshotError(f"{source}: snapshot content is inconsistent ({error!r}).") from None
    return model, header


def _read_verified(path: Path) -> tuple[dict, memoryview]:
    try:
        data = path.read_bytes()
    except OSError as error:
        raise SnapshotError(f"{path}: cannot read snapshot ({error.strerror}).") from None
    return _verified(data, path)


def _verified(data: bytes, source) -> tuple[dict, memoryview]:
    prefix = len(_MAGIC) + 1 + 8
    if len(data) < prefix + 32 or not data.startswith(_MAGIC):
        raise SnapshotError(f"{source}: not an nbstream snapshot (bad magic or too short).")
    version = data[len(_MAGIC)]
    if version != FORMAT_VERSION:
        raise SnapshotError(f"{source}: snapshot format version {version}; this nbstream reads "
                            f"version {FORMAT_VERSION}.")
    body, checksum = data[:-32], data[-32:]
    if hashlib.sha256(body).digest() != checksum:
        raise SnapshotError(f"{source}: checksum mismatch: the file is truncated or was altered.")
    (header_length,) = struct.unpack_from("<Q", body, len(_MAGIC) + 1)
    header = json.loads(body[prefix:prefix + header_length])
    return header, memoryview(body)[prefix + header_length:]


def _array_from(payload: memoryview, entry: dict) -> np.ndarray:
    if entry["dtype"] not in _ALLOWED_DTYPES:
        raise SnapshotError(f"array {entry['name']!r} has disallowed dtype {entry['dtype']!r}.")
    dtype = np.dtype(entry["dtype"])
    count = int(np.prod(entry["shape"], dtype=np.int64))
    array = np.frombuffer(payload, dtype=dtype, count=count, offset=entry["offset"])
    return array.reshape(entry["shape"]).copy()


def _encode_value(value, name: str, arrays: dict[str, np.ndarray]):
    """JSON for scalars; arrays (and lists of arrays) go to the binary section by name."""
    if isinstance(value, list) and value and all(isinstance(v, np.ndarray) for v in value):
        return {"array_list": [_encode_value(v, f"{name}.{i}", arrays) for i, v in enumerate(value)]}
    if isinstance(value, (list, tuple, np.ndarray)):
        array = np.asarray(value)
        if array.dtype.kind in "US" or (array.dtype.kind == "O" and all(isinstance(v, str) for v in array.flat)):
            return {"strings": array.astype(str).tolist()}
        if array.dtype.kind not in "biuf":
            raise TypeError(f"{name}: cannot store values of dtype {array.dtype} in a snapshot.")
        arrays[name] = array
        return {"array": name}
    if isinstance(value, np.generic):
        return value.item()
    return value


def _decode_value(value, arrays: dict[str, np.ndarray]):
    if isinstance(value, dict):
        if "array" in value:
            return arrays[value["array"]]
        if "strings" in value:
            return np.array(value["strings"], dtype=str)
        if "array_list" in value:
            return [_decode_value(v, arrays) for v in value["array_list"]]
    return value


def _decode_tables(arrays: dict[str, np.ndarray]) -> dict[str, object]:
    tables: dict[str, object] = {}
    for name, array in arrays.items():
        if not name.startswith("table."):
            continue
        key, _, index = name.removeprefix("table.").partition(".")
        if index:
            tables.setdefault(key, []).append(array)
        else:
            tables[key] = array[()] if array.ndim == 0 else array
    return tables
