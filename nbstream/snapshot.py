"""Snapshots: one self-describing file per model, written atomically, never pickled.

Layout (all integers little-endian)::

    b"NBSNAP\\x00\\x01"                     magic, with the format version in the last byte
    uint64 header length, header (UTF-8 JSON): kind, parameters, classes, array directory,
                                             examples seen, creation time, caller metadata
    array bytes, each at the offset the directory gives (raw, C order, 8-byte aligned); a
        mostly-zero array (a text model's counts) is stored sparse: its directory entry says
        "nonzero": k, and its bytes are k int64 flat indices, increasing, then their k values
    32-byte SHA-256 of everything above

Loading checks the magic, the version and the checksum before it reads anything else, and
rebuilds arrays only from an allow-list of plain numeric dtypes: a snapshot is data, and
loading one never runs code.
"""

from __future__ import annotations

import datetime as _dt
import errno
import hashlib
import io
import json
import os
import stat
import struct
import tempfile
from pathlib import Path

import numpy as np

from .base import NaiveBayes
from .labels import ClassSet
from .registry import model_class

FORMAT_VERSION = 2  # 2: sparse arrays; version 1 files (all arrays dense) are read too
_READABLE_VERSIONS = (1, 2)
_MAGIC = b"NBSNAP\x00"
_SPARSE_BELOW = 1 / 8  # store an array sparse when fewer of its values are nonzero
_SPARSE_MIN_SIZE = 4_096  # values: smaller arrays are stored as they are
# Dense values all sparse arrays of a snapshot may unfold to (2 GiB of float64): a small file
# must not be able to ask for unbounded memory. Larger models are stored dense, which a file's
# own size bounds.
SPARSE_MAX_VALUES = 1 << 28
_ALLOWED_DTYPES = {"<f8", "<f4", "<i8", "<i4", "<u8", "<u4", "<i2", "<u2", "|i1", "|u1", "|b1"}


class SnapshotError(ValueError):
    """The file is not a readable nbstream snapshot (truncated, altered, or another format)."""


def save(model: NaiveBayes, path, meta: dict | None = None, *, tables: bool = True) -> Path:
    """Write ``model`` to ``path`` atomically: a reader sees the old file or the new one.

    meta : JSON-serialisable dict stored as is (the worker keeps source positions there).
    tables : store the smoothed tables too, for readers other than ``load`` (which
        recomputes them from the statistics, bit-identically, and checks stored ones).
        Without them a snapshot is a third of the size for the discrete models.
    """
    header_bytes, arrays = _serialise(model, meta, tables=tables)
    return _write_atomically(Path(path), header_bytes, arrays)


def dumps(model: NaiveBayes, meta: dict | None = None, *, tables: bool = True) -> bytes:
    """The snapshot of ``model`` as bytes (the same format as ``save`` writes).

    tables : store the smoothed tables too (see ``save``).
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
    if hasattr(model, "feature_names_in_"):
        header["feature_names"] = model.feature_names_in_.tolist()
    for name, array in model._stats.arrays().items():
        arrays[f"stats.{name}"] = array
    if tables:
        for name, value in model._fresh_tables().items():
            _encode_value(value if isinstance(value, list) else np.asarray(value), f"table.{name}", arrays)
    header["arrays"] = []
    offset, sparse_values = 0, 0
    for name, array in list(arrays.items()):
        array = np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("<"))
        entry = {"name": name, "dtype": array.dtype.str, "shape": list(array.shape), "offset": offset}
        if name.startswith("stats.") and array.size >= _SPARSE_MIN_SIZE \
                and sparse_values + array.size <= SPARSE_MAX_VALUES:
            where = np.flatnonzero(array.reshape(-1) != 0)  # a mask first: 4x faster than on floats
            if len(where) < array.size * _SPARSE_BELOW:
                sparse_values += array.size
                entry["nonzero"] = len(where)
                array = _Sparse(where.astype("<i8"), array.reshape(-1)[where])
        arrays[name] = array
        header["arrays"].append(entry)
        offset += _stored_bytes(array)
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
        for part in _stored_parts(array):
            write(memoryview(part.reshape(-1).view(np.uint8)))
            write(b"\x00" * (-part.nbytes % 8))
    out.write(digest.digest())


class _Sparse:
    """A mostly-zero array as it is stored: flat indices of its nonzero values, and those values."""

    def __init__(self, indices: np.ndarray, values: np.ndarray):
        self.indices, self.values = indices, values


def _stored_parts(array) -> tuple[np.ndarray, ...]:
    """What an array is written as, in order: itself, or a sparse one's indices then values."""
    return (array.indices, array.values) if isinstance(array, _Sparse) else (array,)


def _stored_bytes(array) -> int:
    """Bytes an array takes in the file, each part padded to 8."""
    return sum(-(-part.nbytes // 8) * 8 for part in _stored_parts(array))


def _write_atomically(path: Path, header_bytes: bytes, arrays: dict[str, np.ndarray]) -> Path:
    """An OSError names ``path`` (not the temporary file beside it)."""
    try:
        return _replace_atomically(path, header_bytes, arrays)
    except OSError as error:
        reason = os.strerror(error.errno) if error.errno else (error.strerror or str(error))
        raise OSError(error.errno, f"cannot write the snapshot ({reason})", str(path)) from None


def check_output_path(path) -> None:
    """Raise OSError when ``path`` exists as anything but a regular file: a file written beside it
    and renamed into place would replace a directory's name, a device or a FIFO."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return
    if stat.S_ISDIR(mode):
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
    if not stat.S_ISREG(mode):
        raise OSError(None, "a device, FIFO or socket, not a regular file: left as it is", str(path))


def _replace_atomically(path: Path, header_bytes: bytes, arrays: dict[str, np.ndarray]) -> Path:
    check_output_path(path)
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


def _model_from(header, payload: memoryview, source) -> tuple[NaiveBayes, dict]:
    """The model a verified snapshot describes, after checking that its header and content
    are what ``save`` writes: anything else (a re-sealed file with a forged header, say) is a
    SnapshotError, raised before anything is allocated from the header's numbers."""
    try:
        _check_header(header, len(payload))
        arrays = {entry["name"]: _array_from(payload, entry) for entry in header["arrays"]}
        model = model_class(header["kind"])()
        model.set_params(**{name: _decode_value(value, arrays) for name, value in header["params"].items()})
        model.check_params()
        classes = _decode_value(header["classes"], arrays)
        if not isinstance(classes, np.ndarray) or classes.ndim != 1 or len(np.unique(classes)) != len(classes):
            raise ValueError("classes must be a list of distinct labels")
        stats = {name.removeprefix("stats."): a for name, a in arrays.items() if name.startswith("stats.")}
        n_values = sum(a.size for a in stats.values())
        if not 1 <= header["n_features"] <= max(n_values, 1) or len(classes) > max(n_values, 1):
            raise ValueError(f"n_features {header['n_features']} and {len(classes)} classes do not fit the "
                             f"{n_values} values of the statistics")
        model._check_shapes(header["n_features"], None if header["open_classes"] else len(classes))
        model._start(ClassSet(classes, not header["open_classes"]), header["n_features"],
                     _feature_names(header.get("feature_names"), header["n_features"]))
        model._stats = type(model._stats).from_arrays(stats)
        model._stats.check(len(classes), header["n_features"])
        model.n_examples_seen_ = header["examples_seen"]
        stored = _decode_tables(arrays)
        if stored:  # checked against the statistics; without them the tables are computed when first read
            computed = model._refresh()
            if set(stored) == set(computed):  # tables of another version are left aside: they are derived
                _check_tables(stored, computed)
            model._tables.update(computed)
    except SnapshotError as error:
        raise SnapshotError(f"{source}: {error}") from None
    except (KeyError, TypeError, ValueError, IndexError, AttributeError, OverflowError) as error:
        raise SnapshotError(f"{source}: snapshot content is inconsistent ({error}).") from None
    return model, header


def _feature_names(names, n_features: int) -> np.ndarray | None:
    """The optional column names a model was fitted with, one string per feature."""
    if names is None:
        return None
    if not isinstance(names, list) or len(names) != n_features or not all(isinstance(n, str) for n in names):
        raise ValueError(f"feature_names must be {n_features} strings")
    return np.asarray(names, dtype=object)


_HEADER_TYPES = {"kind": str, "params": dict, "open_classes": bool, "n_features": int,
                 "examples_seen": (int, float), "created_at": str, "meta": dict, "arrays": list}


def _check_header(header, payload_bytes: int) -> None:
    """Types and ranges of every header field, and every array inside the payload."""
    if not isinstance(header, dict):
        raise ValueError("the header is not a JSON object")
    for name, kind in _HEADER_TYPES.items():
        if not isinstance(header.get(name), kind) or isinstance(header.get(name), bool) and kind is not bool:
            raise ValueError(f"header field {name!r} is missing or of the wrong type")
    if not np.isfinite(header["examples_seen"]) or header["examples_seen"] < 0:
        raise ValueError("examples_seen must be a non-negative number")
    names, sparse_values = set(), 0
    for entry in header["arrays"]:
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str) or entry["name"] in names:
            raise ValueError("an array entry has no name, or a duplicate one")
        names.add(entry["name"])
        shape, offset = entry.get("shape"), entry.get("offset")
        if entry.get("dtype") not in _ALLOWED_DTYPES:
            raise SnapshotError(f"array {entry['name']!r} has disallowed dtype {entry.get('dtype')!r}.")
        if not isinstance(shape, list) or len(shape) > 2 or not all(_natural(n) for n in shape) \
                or not _natural(offset):
            raise ValueError(f"array {entry['name']!r} has an invalid shape or offset")
        itemsize = int(np.dtype(entry["dtype"]).itemsize)
        if "nonzero" in entry:
            if not _natural(entry["nonzero"]) or entry["nonzero"] > _product(shape):
                raise ValueError(f"sparse array {entry['name']!r} has an invalid count of nonzero values")
            sparse_values += _product(shape)  # Python ints: no overflow
            if sparse_values > SPARSE_MAX_VALUES:
                raise ValueError(f"sparse arrays unfold to more than {SPARSE_MAX_VALUES} values")
            size = (8 + itemsize) * entry["nonzero"]  # int64 indices, then the values
        else:
            size = itemsize * _product(shape)
        if offset + size > payload_bytes:
            raise ValueError(f"array {entry['name']!r} lies beyond the end of the file")


def _natural(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _product(shape: list[int]) -> int:
    result = 1
    for n in shape:
        result *= n
    return result


def _check_tables(stored: dict, computed: dict) -> None:
    """The smoothed tables stored must be those of the statistics (to rounding)."""
    for name, value in computed.items():
        mine = value if isinstance(value, list) else [value]
        theirs = stored[name] if isinstance(stored[name], list) else [stored[name]]
        if len(mine) != len(theirs) or any(not _close(a, b) for a, b in zip(mine, theirs)):
            raise ValueError(f"the stored table {name!r} does not match the statistics")


def _close(computed, stored) -> bool:
    """Equal values to rounding (a scalar is stored as an array of one)."""
    computed, stored = np.asarray(computed), np.asarray(stored)
    if computed.shape != stored.shape and computed.size != 1:
        return False
    return computed.size == stored.size and bool(np.allclose(computed.ravel(), stored.ravel(), rtol=1e-9, atol=0))


def _read_verified(path: Path) -> tuple[dict, memoryview]:
    try:
        with open(path, "rb", opener=_open_no_wait) as file:
            info = os.fstat(file.fileno())
            if not stat.S_ISREG(info.st_mode):
                raise SnapshotError(f"{path}: not a regular file.")
            data = file.read(info.st_size + 1)
    except SnapshotError:
        raise
    except IsADirectoryError:
        raise SnapshotError(f"{path}: is a directory, not a snapshot.") from None
    except OSError as error:
        raise SnapshotError(f"{path}: cannot read snapshot ({error.strerror or error}).") from None
    return _verified(data, path)


def _open_no_wait(path, flags: int) -> int:
    """Open without blocking (a FIFO would wait for a writer); reads stay blocking."""
    fd = os.open(path, flags | os.O_NONBLOCK)
    os.set_blocking(fd, True)
    return fd


def _verified(data: bytes, source) -> tuple[dict, memoryview]:
    prefix = len(_MAGIC) + 1 + 8
    if len(data) < prefix + 32 or not data.startswith(_MAGIC):
        raise SnapshotError(f"{source}: not an nbstream snapshot (bad magic or too short).")
    version = data[len(_MAGIC)]
    if version not in _READABLE_VERSIONS:
        raise SnapshotError(f"{source}: snapshot format version {version}; this nbstream reads "
                            f"versions {', '.join(map(str, _READABLE_VERSIONS))}.")
    body, checksum = data[:-32], data[-32:]
    if hashlib.sha256(body).digest() != checksum:
        raise SnapshotError(f"{source}: checksum mismatch: the file is truncated or was altered.")
    (header_length,) = struct.unpack_from("<Q", body, len(_MAGIC) + 1)
    if header_length > len(body) - prefix:
        raise SnapshotError(f"{source}: the header length runs past the end of the file.")
    try:
        header = json.loads(body[prefix:prefix + header_length])
    except (ValueError, RecursionError) as error:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise SnapshotError(f"{source}: the header is not valid JSON ({type(error).__name__}).") from None
    if isinstance(header, dict):
        header["format_version"] = version  # what the magic says, for readers of the header
    return header, memoryview(body)[prefix + header_length:]


def _array_from(payload: memoryview, entry: dict) -> np.ndarray:
    """An array the header describes (already checked to lie inside the payload)."""
    dtype = np.dtype(entry["dtype"])
    count = _product(entry["shape"])
    if "nonzero" not in entry:
        array = np.frombuffer(payload, dtype=dtype, count=count, offset=entry["offset"])
        return array.reshape(entry["shape"]).copy()
    k = entry["nonzero"]
    indices = np.frombuffer(payload, dtype="<i8", count=k, offset=entry["offset"])
    values = np.frombuffer(payload, dtype=dtype, count=k, offset=entry["offset"] + 8 * k)
    if k and (indices[0] < 0 or indices[-1] >= count or np.any(indices[1:] <= indices[:-1])):
        raise ValueError(f"sparse array {entry['name']!r} has indices out of order or out of range")
    array = np.zeros(count, dtype=dtype)
    array[indices] = values
    return array.reshape(entry["shape"])


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
