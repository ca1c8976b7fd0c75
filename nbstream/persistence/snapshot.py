"""Snapshots: one self-describing file per model, written atomically, never pickled.

Layout (all integers little-endian; the frame is ``framing.py``'s)::

    b"NBSNAP\\x00", uint8 format version    magic and version
    uint64 header length, header (UTF-8 JSON): kind, parameters, classes, array directory,
                                             examples seen, creation time, caller metadata
    array bytes, each at the offset the directory gives (raw, C order, 8-byte aligned); a
        mostly-zero array (a text model's counts) is stored sparse: its directory entry says
        "nonzero": k, and its bytes are k int64 flat indices, increasing, then their k values
    32-byte SHA-256 of everything above

Loading checks the magic, the version and the checksum before it reads anything else, and
rebuilds arrays only from an allow-list of plain numeric dtypes: a snapshot is data, and
loading one never runs code. A file is read a piece at a time: its checksum first, then each
statistic straight into the array the model keeps; the stored tables are compared with those the
statistics give a block at a time, so loading holds the model and little more, never the file.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import io
import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any, TypeAlias

import numpy as np

from ..naive_bayes.base import NaiveBayes
from ..naive_bayes.keyed import KeyedNB
from ..naive_bayes.kinds import model_class
from ..naive_bayes.state import ModelState, is_natural
from ..naive_bayes.tables import TableValue
from ..utils.ndarrays import AnyArray, IntArray
from .atomic import AtomicFile
from .framing import FrameError, Framing, NewerFrameError, read_into
from .keyed import KEYED_PREFIX, keyed_from, keyed_header

FORMAT_VERSION = 2  # 2: sparse arrays; version 1 files (all arrays dense) are read too
SNAPSHOT = Framing(b"NBSNAP\x00", "not an nbstream snapshot (bad magic or too short)", "snapshot",
                   versions=(1, 2), length_bytes=8, checksum=True)
_SPARSE_BELOW = 1 / 8  # store an array sparse when fewer of its values are nonzero
_SPARSE_MIN_SIZE = 4_096  # values: smaller arrays are stored as they are
# Dense values all sparse arrays of a snapshot may unfold to (2 GiB of float64): a small file
# must not be able to ask for unbounded memory. Larger models are stored dense, which a file's
# own size bounds.
SPARSE_MAX_VALUES = 1 << 28
_ALLOWED_DTYPES = {"<f8", "<f4", "<i8", "<i4", "<u8", "<u4", "<i2", "<u2", "|i1", "|u1", "|b1"}


class SnapshotError(ValueError):
    """The file is not a readable nbstream snapshot (truncated, altered, or another format)."""


class NewerFormatError(SnapshotError):
    """A snapshot of a format version newer than this nbstream reads: written by a newer nbstream."""


class _Sparse:
    """A mostly-zero array as it is stored: flat indices of its nonzero values, and those values."""

    def __init__(self, indices: IntArray, values: AnyArray):
        self.indices, self.values = indices, values


Stored: TypeAlias = "AnyArray | _Sparse"  # an array as the file holds it
Header: TypeAlias = dict[str, Any]  # JSON: its fields are checked by _check_header


def save(model: NaiveBayes[Any, Any] | KeyedNB, path: str | os.PathLike[str], meta: dict[str, Any] | None = None, *,
         tables: bool = True) -> Path:
    """Write ``model`` to ``path`` atomically: a reader sees the old file or the new one.

    meta : JSON-serialisable dict stored as is (the worker keeps source positions there).
    tables : store the smoothed tables too, for readers other than ``load`` (which
        recomputes them from the statistics, bit-identically, and checks stored ones).
        Without them a snapshot holds the statistics alone: a count model's is much smaller.

    A ``KeyedNB`` is stored as its group's model with the keys' counts beside it: ``load`` reads
    the group's model, ``load_keyed`` the keyed model.
    """
    header_bytes, arrays = _serialise(model, meta, tables=tables)
    return _write_atomically(Path(path), header_bytes, arrays)


def dumps(model: NaiveBayes[Any, Any] | KeyedNB, meta: dict[str, Any] | None = None, *, tables: bool = True) -> bytes:
    """The snapshot of ``model`` as bytes (the same format as ``save`` writes).

    tables : store the smoothed tables too (see ``save``).
    """
    header_bytes, arrays = _serialise(model, meta, tables=tables)
    buffer = io.BytesIO()
    _write_body(buffer, header_bytes, arrays)
    return buffer.getvalue()


def _serialise(model: NaiveBayes[Any, Any] | KeyedNB, meta: dict[str, Any] | None, *,
               tables: bool) -> tuple[bytes, dict[str, Stored]]:
    keyed = model.export_state(copy=False) if isinstance(model, KeyedNB) else None
    group = model.group_model_ if isinstance(model, KeyedNB) else model
    state = group.export_state(tables=tables, copy=False)
    arrays: dict[str, AnyArray] = {}
    header: dict[str, Any] = {
        "kind": state.kind,
        "params": {name: _encode_value(value, f"param.{name}", arrays) for name, value in state.params.items()},
        "classes": _encode_value(state.classes, "classes", arrays),
        "open_classes": state.open_classes,
        "n_features": state.n_features,
        "examples_seen": state.examples_seen,
        "created_at": _dt.datetime.now(_dt.UTC).isoformat(),
        "meta": meta or {},
    }
    if state.feature_names is not None:
        header["feature_names"] = state.feature_names.tolist()
    if state.float_dtype != "float64":  # absent from files of models in float64, as before it existed
        header["float_dtype"] = state.float_dtype
    for name, array in state.statistics.items():
        arrays[f"stats.{name}"] = array
    for name, value in state.tables.items():
        _encode_value(value if isinstance(value, list) else np.asarray(value), f"table.{name}", arrays)
    if keyed is not None:
        header["keyed"] = keyed_header(keyed, arrays, _encode_value)
    return _laid_out(header, arrays)


def _laid_out(header: dict[str, Any], arrays: dict[str, AnyArray]) -> tuple[bytes, dict[str, Stored]]:
    """The header with its array directory, and the arrays as stored (mostly-zero statistics sparse)."""
    stored: dict[str, Stored] = {}
    directory: list[dict[str, Any]] = []
    offset, sparse_values = 0, 0
    for name, array in arrays.items():
        dense = np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("<"))
        entry = {"name": name, "dtype": dense.dtype.str, "shape": list(dense.shape), "offset": offset}
        kept: Stored = dense
        if name.startswith("stats.") and dense.size >= _SPARSE_MIN_SIZE \
                and sparse_values + dense.size <= SPARSE_MAX_VALUES:
            where = np.flatnonzero(dense.reshape(-1) != 0)  # a mask first: faster than on floats
            if len(where) < dense.size * _SPARSE_BELOW:
                sparse_values += dense.size
                entry["nonzero"] = len(where)
                kept = _Sparse(where.astype("<i8"), dense.reshape(-1)[where])
        stored[name] = kept
        directory.append(entry)
        offset += _stored_bytes(kept)
    header["arrays"] = directory
    try:
        return json.dumps(header, allow_nan=False).encode(), stored
    except (TypeError, ValueError) as error:
        raise TypeError(f"snapshot metadata must be JSON-serialisable: {error}") from None


def _write_body(out: IO[bytes], header_bytes: bytes, arrays: dict[str, Stored]) -> None:
    """The frame of the header and the arrays (see the module docstring)."""
    SNAPSHOT.write(out, header_bytes, _array_bytes(arrays), FORMAT_VERSION)


def _array_bytes(arrays: dict[str, Stored]) -> Iterator[memoryview | bytes]:
    """The arrays' bytes in order, each part padded to 8."""
    for array in arrays.values():
        for part in _stored_parts(array):
            yield part.reshape(-1).view(np.uint8).data
            yield b"\x00" * (-part.nbytes % 8)


def _stored_parts(array: Stored) -> tuple[AnyArray, ...]:
    """What an array is written as, in order: itself, or a sparse one's indices then values."""
    return (array.indices, array.values) if isinstance(array, _Sparse) else (array,)


def _stored_bytes(array: Stored) -> int:
    """Bytes an array takes in the file, each part padded to 8."""
    return sum(-(-part.nbytes // 8) * 8 for part in _stored_parts(array))


def _write_atomically(path: Path, header_bytes: bytes, arrays: dict[str, Stored]) -> Path:
    """An OSError names ``path`` (not the temporary file beside it)."""
    try:
        return _replace_atomically(path, header_bytes, arrays)
    except OSError as error:
        reason = os.strerror(error.errno) if error.errno else (error.strerror or str(error))
        raise OSError(error.errno, f"cannot write the snapshot ({reason})", str(path)) from None


def _replace_atomically(path: Path, header_bytes: bytes, arrays: dict[str, Stored]) -> Path:
    with AtomicFile(path) as out:
        _write_body(out, header_bytes, arrays)
    return path


def read_header(path: str | os.PathLike[str]) -> Header:
    """The verified header of a snapshot (kind, params, classes, meta, ...) without arrays: a
    JSON object whose fields have the types ``save`` writes (SnapshotError otherwise)."""
    return _checked_header(*_read_verified(Path(path)), path)


def load(path: str | os.PathLike[str]) -> NaiveBayes[Any, Any]:
    """Read a snapshot: the model predicts bit-identically and can keep training.

    Raises SnapshotError for a truncated, altered or foreign file.
    """
    return load_with_header(path)[0]


def load_with_header(path: str | os.PathLike[str]) -> tuple[NaiveBayes[Any, Any], Header]:
    """The model and the verified header (with the caller's ``meta``), from one read."""
    with _opened(Path(path)) as (header, payload):
        return _model_from(header, payload, path)


def loads(data: bytes, source: str = "snapshot") -> tuple[NaiveBayes[Any, Any], Header]:
    """The model and header of a snapshot held in memory (see ``dumps``); ``source`` names it in errors."""
    return _model_from(*_verified(data, source), source)


def load_keyed(path: str | os.PathLike[str]) -> KeyedNB:
    """Read a snapshot of a ``KeyedNB``: it predicts as the model saved, key by key, and can keep
    learning. SnapshotError for a snapshot of another model, or a truncated, altered or foreign file."""
    with _opened(Path(path)) as (header, payload):
        return _keyed_from(header, payload, path)


def load_with_keys(path: str | os.PathLike[str]) -> tuple[NaiveBayes[Any, Any], Header, KeyedNB | None]:
    """The model, the verified header and, when the snapshot holds a model per key, that
    ``KeyedNB`` (whose group model the model is; None else), from one read."""
    with _opened(Path(path)) as (header, payload):
        if isinstance(header, dict) and "keyed" in header:
            keyed = _keyed_from(header, payload, path)
            return keyed.group_model_, _checked_header(header, payload, path), keyed
        return (*_model_from(header, payload, path), None)


def loads_keyed(data: bytes, source: str = "snapshot") -> KeyedNB:
    """The ``KeyedNB`` of a snapshot held in memory (see ``dumps``)."""
    return _keyed_from(*_verified(data, source), source)


def _keyed_from(header: object, payload: _Payload, source: object) -> KeyedNB:
    checked = _checked_header(header, payload, source)
    if "keyed" not in checked:
        raise SnapshotError(f"{source}: not a snapshot of a keyed model (it holds a {checked['kind']} model: "
                            "read it with load).")
    try:
        arrays = _Arrays(payload, checked["arrays"])
        return keyed_from(_state_of(checked, arrays), checked["keyed"], arrays, _decode_value)
    except SnapshotError as error:
        raise SnapshotError(f"{source}: {error}") from None
    except (KeyError, TypeError, ValueError, IndexError, AttributeError, OverflowError) as error:
        raise SnapshotError(f"{source}: snapshot content is inconsistent ({error}).") from None


class _Arrays(dict[str, AnyArray]):
    """The arrays of a snapshot by name: all but the stored tables and the keys' counts read at once,
    those when asked for (KeyError for a name the directory lacks)."""

    def __init__(self, payload: _Payload, directory: list[dict[str, Any]]):
        super().__init__({entry["name"]: _array_from(payload, entry) for entry in directory
                          if not entry["name"].startswith(("table.", KEYED_PREFIX))})
        self._payload, self._entries = payload, {entry["name"]: entry for entry in directory}

    def __missing__(self, name: str) -> AnyArray:
        array = _array_from(self._payload, self._entries[name])
        self[name] = array
        return array


class _Payload:
    """The arrays' bytes of a verified snapshot, held in memory (``loads``) or read by offset from
    its open file (``load``): ``read`` gives each array as a new array of its own."""

    def __init__(self, size: int, data: memoryview | None = None, file: IO[bytes] | None = None, start: int = 0):
        self.size, self._data, self._file, self._start = size, data, file, start

    def read(self, offset: int, dtype: np.dtype[Any], count: int) -> AnyArray:
        """``count`` values of ``dtype`` from ``offset`` (checked to lie inside the payload)."""
        if self._data is not None:
            return np.frombuffer(self._data, dtype=dtype, count=count, offset=offset).copy()
        assert self._file is not None
        array = np.empty(count, dtype=dtype)
        self._file.seek(self._start + offset)
        try:
            read_into(self._file, array.view(np.uint8).data)
        except FrameError as error:
            raise SnapshotError(f"{error.problem}.") from None
        return array


def _model_from(header: object, payload: _Payload, source: object) -> tuple[NaiveBayes[Any, Any], Header]:
    """The model a verified snapshot describes, after checking that its header and content
    are what ``save`` writes: anything else (a re-sealed file with a forged header, say) is a
    SnapshotError, raised before anything is allocated from the header's numbers. The stored
    tables are not read whole: they are compared, a block at a time, with those the statistics
    give, which the model keeps."""
    checked = _checked_header(header, payload, source)
    try:
        entries = [entry for entry in checked["arrays"] if entry["name"].startswith("table.")]
        arrays = _Arrays(payload, checked["arrays"])  # the tables' arrays only where the header names one
        stored = _stored_tables(entries)
        model = model_class(checked["kind"]).from_state(_state_of(checked, arrays), copy=False,
                                                        keep_tables=bool(stored))
        if stored:
            _check_stored_tables(stored, model.export_state(copy=False).tables, payload)
    except SnapshotError as error:
        raise SnapshotError(f"{source}: {error}") from None
    except (KeyError, TypeError, ValueError, IndexError, AttributeError, OverflowError) as error:
        raise SnapshotError(f"{source}: snapshot content is inconsistent ({error}).") from None
    return model, checked


def _checked_header(header: object, payload: _Payload, source: object) -> Header:
    """The header, or a SnapshotError naming the source and the first field that is wrong."""
    try:
        return _check_header(header, payload.size)
    except SnapshotError as error:
        raise SnapshotError(f"{source}: {error}") from None
    except (KeyError, TypeError, ValueError) as error:
        raise SnapshotError(f"{source}: snapshot content is inconsistent ({error}).") from None


def _state_of(header: Header, arrays: dict[str, AnyArray]) -> ModelState:
    """The learned state a checked header and its arrays describe (``from_state`` checks its values)."""
    names = header.get("feature_names")
    return ModelState(
        kind=header["kind"],
        params={name: _decode_value(value, arrays) for name, value in header["params"].items()},
        classes=_decode_value(header["classes"], arrays), open_classes=header["open_classes"],
        n_features=header["n_features"], examples_seen=header["examples_seen"],
        statistics={name.removeprefix("stats."): a for name, a in arrays.items() if name.startswith("stats.")},
        tables={}, feature_names=None if names is None else np.asarray(names, dtype=object),
        float_dtype=header.get("float_dtype", "float64"))


_HEADER_TYPES: dict[str, type] = {"kind": str, "params": dict, "open_classes": bool, "n_features": int,
                                  "examples_seen": int, "created_at": str, "meta": dict, "arrays": list}
_OPTIONAL_HEADER_TYPES: dict[str, type] = {"feature_names": list, "float_dtype": str, "keyed": dict}


def _check_header(header: object, payload_bytes: int) -> Header:
    """The header, once the type of every field and every array's place inside the payload are
    checked (ranges and consistency are ``from_state``'s to check, before it allocates)."""
    if not isinstance(header, dict):
        raise ValueError("the header is not a JSON object")
    for name, kind in _HEADER_TYPES.items():
        if not _is_a(header.get(name), kind):
            raise ValueError(f"header field {name!r} is missing or of the wrong type")
    for name, kind in _OPTIONAL_HEADER_TYPES.items():
        if name in header and not _is_a(header[name], kind):
            raise ValueError(f"header field {name!r} is of the wrong type")
    names: set[str] = set()
    sparse_values = 0
    for entry in header["arrays"]:
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str) or entry["name"] in names:
            raise ValueError("an array entry has no name, or a duplicate one")
        names.add(entry["name"])
        sparse_values += _check_array_entry(entry, payload_bytes)
        if sparse_values > SPARSE_MAX_VALUES:
            raise ValueError(f"sparse arrays unfold to more than {SPARSE_MAX_VALUES} values")
    return header


def _check_array_entry(entry: dict[str, Any], payload_bytes: int) -> int:
    """Check one array's entry of the directory (its dtype, shape and place inside the payload);
    the values it unfolds to when it is stored sparse (0 when dense)."""
    shape, offset = entry.get("shape"), entry.get("offset")
    if entry.get("dtype") not in _ALLOWED_DTYPES:
        raise SnapshotError(f"array {entry['name']!r} has disallowed dtype {entry.get('dtype')!r}.")
    if not isinstance(shape, list) or len(shape) > 2 or not all(is_natural(n) for n in shape) \
            or not is_natural(offset):
        raise ValueError(f"array {entry['name']!r} has an invalid shape or offset")
    itemsize = int(np.dtype(entry["dtype"]).itemsize)
    unfolds = 0
    if "nonzero" in entry:
        if not is_natural(entry["nonzero"]) or entry["nonzero"] > _product(shape):
            raise ValueError(f"sparse array {entry['name']!r} has an invalid count of nonzero values")
        unfolds = _product(shape)  # Python ints: no overflow
        size = (8 + itemsize) * entry["nonzero"]  # int64 indices, then the values
    else:
        size = itemsize * _product(shape)
    if offset + size > payload_bytes:
        raise ValueError(f"array {entry['name']!r} lies beyond the end of the file")
    return unfolds


def _is_a(value: object, kind: type) -> bool:
    """isinstance, where a JSON true or false is a bool and not an int."""
    return isinstance(value, kind) and (kind is bool or not isinstance(value, bool))


def _product(shape: list[int]) -> int:
    result = 1
    for n in shape:
        result *= n
    return result


@contextlib.contextmanager
def _opened(path: Path) -> Iterator[tuple[object, _Payload]]:
    """The verified header of the snapshot at ``path`` and its payload, read from the open file
    while this lasts (the checksum is checked first, a piece at a time)."""
    try:
        with open(path, "rb", buffering=0, opener=_open_no_wait) as file:
            info = os.fstat(file.fileno())
            if not stat.S_ISREG(info.st_mode):
                raise SnapshotError(f"{path}: not a regular file.")
            try:
                opened = SNAPSHOT.open_file(file, info.st_size, str(path))
            except NewerFrameError as error:
                raise NewerFormatError(f"{error}.") from None
            except FrameError as error:
                raise SnapshotError(f"{error}." if error.problem != str(error) else f"{path}: {error}.") from None
            header = opened.header
            header["format_version"] = opened.version  # what the magic says, for readers of the header
            yield header, _Payload(opened.body_size, file=file, start=opened.body_start)
    except SnapshotError:
        raise
    except IsADirectoryError:
        raise SnapshotError(f"{path}: is a directory, not a snapshot.") from None
    except OSError as error:
        raise SnapshotError(f"{path}: cannot read snapshot ({error.strerror or error}).") from None


def _read_verified(path: Path) -> tuple[object, _Payload]:
    """The verified header of the snapshot at ``path`` (its payload, past the file's closing, unread)."""
    with _opened(path) as (header, payload):
        return header, payload


def _open_no_wait(path: str, flags: int) -> int:
    """Open without blocking (a FIFO would wait for a writer); reads stay blocking."""
    fd = os.open(path, flags | os.O_NONBLOCK)
    os.set_blocking(fd, True)
    return fd


def _verified(data: bytes, source: object) -> tuple[object, _Payload]:
    try:
        opened = SNAPSHOT.open(data, str(source))
    except NewerFrameError as error:
        raise NewerFormatError(f"{error}.") from None
    except FrameError as error:
        raise SnapshotError(f"{error}.") from None
    header = opened.header
    header["format_version"] = opened.version  # what the magic says, for readers of the header
    return header, _Payload(len(opened.body), data=opened.body)


def _array_from(payload: _Payload, entry: dict[str, Any]) -> AnyArray:
    """An array the header describes (already checked to lie inside the payload)."""
    dtype = np.dtype(entry["dtype"])
    count = _product(entry["shape"])
    if "nonzero" not in entry:
        return payload.read(entry["offset"], dtype, count).reshape(entry["shape"])
    k = entry["nonzero"]
    indices = payload.read(entry["offset"], np.dtype("<i8"), k)
    values = payload.read(entry["offset"] + 8 * k, dtype, k)
    if k and (indices[0] < 0 or indices[-1] >= count or np.any(indices[1:] <= indices[:-1])):
        raise ValueError(f"sparse array {entry['name']!r} has indices out of order or out of range")
    array = np.zeros(count, dtype=dtype)
    array[indices] = values
    return array.reshape(entry["shape"])


_TABLE_BLOCK = 1 << 18  # values of a stored table compared at a time (2 MiB of float64)


def _stored_tables(entries: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """The directory entries of the stored tables by table: ``table.name`` one array (a scalar
    when it has no axis), ``table.name.0``, ``table.name.1``, ... a list of arrays."""
    tables: dict[str, list[dict[str, Any]]] = {}
    lists: dict[str, list[dict[str, Any]]] = {}
    for entry in entries:
        key, _, index = entry["name"].removeprefix("table.").partition(".")
        if index:
            lists.setdefault(key, []).append(entry)
        else:
            tables[key] = [entry]
    twice = set(tables) & set(lists)
    if twice:
        raise ValueError(f"the tables {sorted(twice)} are stored twice")
    return {**tables, **lists}


def _check_stored_tables(stored: dict[str, list[dict[str, Any]]], computed: dict[str, TableValue],
                         payload: _Payload) -> None:
    """``tables.check_tables`` of the stored tables, read a block at a time: each must be what the
    statistics give (to rounding). Tables of another version (other names) are left aside."""
    if set(stored) != set(computed):
        return
    for name, value in computed.items():
        mine = value if isinstance(value, list) else [value]
        if len(mine) != len(stored[name]) or not all(
                _close_to_stored(np.asarray(a), entry, payload) for a, entry in zip(mine, stored[name], strict=True)):
            raise ValueError(f"the stored table {name!r} does not match the statistics")


def _close_to_stored(computed: AnyArray, entry: dict[str, Any], payload: _Payload) -> bool:
    """``tables._close`` of a computed table and a stored one (dense, never sparse), block by block."""
    if "nonzero" in entry:
        return False
    shape, count = tuple(entry["shape"]), _product(entry["shape"])
    if (computed.shape != shape and computed.size != 1) or computed.size != count:
        return False
    flat, dtype = computed.reshape(-1), np.dtype(entry["dtype"])
    for start in range(0, count, _TABLE_BLOCK):
        theirs = payload.read(entry["offset"] + start * dtype.itemsize, dtype, min(_TABLE_BLOCK, count - start))
        if not np.allclose(flat[start:start + len(theirs)], theirs, rtol=1e-9, atol=0):
            return False
    return True


def _encode_value(value: object, name: str, arrays: dict[str, AnyArray]) -> object:
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


def _decode_value(value: object, arrays: dict[str, AnyArray]) -> Any:
    if isinstance(value, dict):
        if "array" in value:
            return arrays[value["array"]]
        if "strings" in value:
            return np.array(value["strings"], dtype=str)
        if "array_list" in value:
            return [_decode_value(v, arrays) for v in value["array_list"]]
    return value
