"""Pending examples as bytes: the rows of each log as arrays of a frame (``frame``), and back.

Arrays of log L (examples, labels, joined), n rows each::

    L.ids     uint8: UTF-8 JSON list of the n ids (strings and integers: exact, 2**70 included)
    L.times   (n,) int64 ms
    examples.best (n,) int32 (-1: served before the model knew a class), examples.proba (n, C)
    float32/64, examples.offset (n,) int64, examples.rows (n, d) dense, or examples.rows.data /
    .indices (int32) / .indptr (int64) for CSR
    labels.label (n,) numbers or strings, labels.offset (n,) int64 (-1: not known)

and, when the group learns other models beside its first (challengers), examples.best@NAME and
examples.proba@NAME of each: what that model served (the first model's are best and proba);
and in the meta, under "rows", the feature rows' layout ("dense" or "csr"), the dtype they
came in and their number of columns. Reading checks each array's dtype, shape and values (ids
distinct, counts and columns in range, probabilities in [0, 1], no NaN) and raises ValueError
with one line for anything a writer of this version would not have written.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from nbstream.utils.checked import integer, shown
from nbstream.utils.ndarrays import AnyArray

from ...model_names import is_model_name
from .frame import pack, unpack
from .keyed_log import Id, KeyedLog, Taken
from .rows import Column, DenseRows, Rows, SparseRows

EXAMPLES, LABELS, JOINED = "examples", "labels", "joined"  # the store's three logs
MOST_FEATURES = 1 << 31  # text hashed into 2**31 columns, the most --hash-bits allows
_COLUMNS = {EXAMPLES: ("rows", "best", "proba", "offset"), LABELS: ("label", "offset"), JOINED: ()}
LOGS = tuple(_COLUMNS)
_INPUT_DTYPES = {"<f8", "<f4", "<i8", "<i4", "<u8", "<u4", "<i2", "<u2", "|i1", "|u1", "|b1"}
_OF = "@"  # best@NAME, proba@NAME: what the model NAME served


def served_columns(name: str | None) -> tuple[str, str]:
    """The examples' columns of what model ``name`` served, (best, proba) (None: the first model)."""
    return ("best", "proba") if name is None else (f"best{_OF}{name}", f"proba{_OF}{name}")


def served_names(columns: Iterable[str]) -> list[str]:
    """The names of the models other than the first whose served predictions ``columns`` hold."""
    return [column.partition(_OF)[2] for column in columns if column.startswith("best" + _OF)]


@dataclass(frozen=True)
class ModelsKept:
    """Whose served predictions the examples of a store read back are to hold: ``first``'s as
    best and proba, each of ``others``' under its name; ``stored`` is the model whose predictions
    the store was written with as best and proba (the first model of the state it belongs to)."""
    stored: str
    first: str
    others: tuple[str, ...] = ()

    def kept(self, columns: dict[str, Column]) -> dict[str, Column]:
        """An examples chunk's columns as the models held now need them. A model the chunk holds
        nothing of (one added since) served nothing: best -1, no probabilities; the predictions
        of a model no longer held are left out."""
        n = len(columns["offset"])
        served = {self.stored: (columns["best"], columns["proba"])}
        for name in served_names(columns):
            best, proba = served_columns(name)
            served[name] = (columns[best], columns[proba])
        nothing = (np.full(n, -1, dtype=np.int32), np.zeros((n, 0)))
        kept = {"rows": columns["rows"]}
        kept["best"], kept["proba"] = served.get(self.first, nothing)
        kept["offset"] = columns["offset"]  # the order ``PendingExamples.add`` makes them in
        for name in self.others:
            best, proba = served_columns(name)
            kept[best], kept[proba] = served.get(name, nothing)
        return kept


def encode(logs: dict[str, KeyedLog]) -> bytes:
    """One frame of every live row of the logs, oldest first."""
    return encode_rows({name: log.take(log.live_seqs()) for name, log in logs.items()})


def decode(data: bytes, what: str = "pending examples") -> dict[str, Taken]:
    """The rows of each log a frame of ``encode`` holds."""
    return decode_rows(data, LOGS, what)


def encode_rows(logs: dict[str, Taken]) -> bytes:
    """One frame of the rows of some logs."""
    meta: dict[str, Any] = {"rows": None}
    arrays: dict[str, AnyArray] = {}
    for name, taken in logs.items():
        rows_meta = _add_arrays(name, taken, arrays)
        if rows_meta is not None:
            meta["rows"] = rows_meta
    return pack(meta, arrays)


def decode_rows(data: bytes, names: tuple[str, ...], what: str) -> dict[str, Taken]:
    """The rows of the logs ``names`` a frame of ``encode_rows`` holds (and nothing else)."""
    meta, arrays = unpack(data, what)
    if set(meta) != {"rows"}:
        raise ValueError(f"{what}: the meta must hold rows alone; it holds {sorted(meta)}")
    models = _models_of(arrays, what)
    logs = {name: _rows_from(name, meta["rows"], arrays, what, models) for name in names}
    expected = {array for name in names for array in _array_names(name, meta["rows"], len(logs[name].ids), models)}
    if set(arrays) != expected:
        raise ValueError(f"{what}: arrays {sorted(set(arrays) ^ expected)} are missing or not expected")
    return logs


def _add_arrays(name: str, taken: Taken, arrays: dict[str, AnyArray]) -> dict[str, Any] | None:
    """Put a log's rows among ``arrays``; the meta of its feature rows, if it has any."""
    arrays[f"{name}.ids"] = np.frombuffer(json.dumps(taken.ids).encode(), dtype=np.uint8)
    arrays[f"{name}.times"] = taken.times
    rows_meta = None
    for column, values in taken.columns.items():
        if isinstance(values, DenseRows):
            arrays[f"{name}.{column}"] = values.values
        elif isinstance(values, SparseRows):
            arrays.update({f"{name}.{column}.data": values.data, f"{name}.{column}.indices": values.indices,
                           f"{name}.{column}.indptr": values.indptr})
        else:
            arrays[f"{name}.{column}"] = values
            continue
        rows_meta = {"layout": "dense" if isinstance(values, DenseRows) else "csr", "dtype": values.dtype.str,
                     "n_features": values.values.shape[1] if isinstance(values, DenseRows) else values.n_features}
    return rows_meta


def _models_of(arrays: dict[str, AnyArray], what: str) -> list[str]:
    """The names of the other models whose served predictions the examples' arrays hold."""
    models = served_names(array.removeprefix(f"{EXAMPLES}.") for array in arrays if array.startswith(EXAMPLES + "."))
    for model in models:
        if not is_model_name(model):
            raise ValueError(f"{what}: examples.{served_columns(model)[0]} names no model")
    return models


def _array_names(name: str, rows_meta: object, n: int, models: list[str]) -> list[str]:
    names = [f"{name}.ids", f"{name}.times"]
    columns = _COLUMNS[name] + (tuple(c for model in models for c in served_columns(model)) if name == EXAMPLES else ())
    for column in columns if n else ():
        is_csr = column == "rows" and isinstance(rows_meta, dict) and rows_meta.get("layout") == "csr"
        names += [f"{name}.{column}.{part}" for part in ("data", "indices", "indptr")] if is_csr \
            else [f"{name}.{column}"]
    return names


def _rows_from(name: str, rows_meta: object, arrays: dict[str, AnyArray], what: str, models: list[str]) -> Taken:
    where = f"{what}: {name}"
    ids = _ids(_array(arrays, f"{name}.ids", "|u1", 1, where), where)
    n = len(ids)
    times = _array(arrays, f"{name}.times", "<i8", 1, where, (n,))
    if not n:
        return Taken(ids, times, {})
    columns: dict[str, Column] = {}
    if name == EXAMPLES:
        columns["rows"] = _feature_rows(arrays, f"{name}.rows", rows_meta, n, where)
        columns["best"], columns["proba"] = _served(arrays, f"{name}.best", f"{name}.proba", n, where)
        offsets = _array(arrays, f"{name}.offset", "<i8", 1, where, (n,))
        if (offsets < 0).any():
            raise ValueError(f"{where}: offsets must be at least 0")
        columns["offset"] = offsets
        for model in models:  # in the order ``PendingExamples.add`` makes them
            best, proba = served_columns(model)
            columns[best], columns[proba] = _served(arrays, f"{name}.{best}", f"{name}.{proba}", n, where)
    elif name == LABELS:
        labels = arrays.get(f"{name}.label")
        if labels is None or labels.shape != (n,):
            raise ValueError(f"{where}: the labels must be an array of shape ({n:,},); "
                             f"got {'none' if labels is None else labels.shape}")
        _finite(labels, f"{where}: the labels")
        columns["label"] = labels
        label_offsets = _array(arrays, f"{name}.offset", "<i8", 1, where, (n,))
        if (label_offsets < -1).any():
            raise ValueError(f"{where}: label offsets must be at least -1 (not known)")
        columns["offset"] = label_offsets
    return Taken(ids, times, columns)


def _served(arrays: dict[str, AnyArray], best_name: str, proba_name: str, n: int, where: str
            ) -> tuple[AnyArray, AnyArray]:
    """What one model served n examples: (best (n,) int32, proba (n, C)), checked."""
    proba = _array(arrays, proba_name, ("<f8", "<f4"), 2, where, (n, None))
    if not ((proba >= 0) & (proba <= 1)).all():  # NaN fails too
        raise ValueError(f"{where}: served probabilities must lie in [0, 1]")
    best = _array(arrays, best_name, "<i4", 1, where, (n,))
    if len(best) and (best.min() < -1 or best.max() >= proba.shape[1]):
        raise ValueError(f"{where}: each best must be from -1 (nothing served) to {proba.shape[1] - 1:,}")
    return best, proba


def _feature_rows(arrays: dict[str, AnyArray], prefix: str, meta: object, n: int, where: str) -> Rows:
    if not (isinstance(meta, dict) and set(meta) == {"layout", "dtype", "n_features"}
            and meta["layout"] in ("dense", "csr") and meta["dtype"] in _INPUT_DTYPES):
        raise ValueError(f"{where}: rows must be an object of layout (dense or csr), dtype (one of "
                         f"{sorted(_INPUT_DTYPES)}) and n_features; got {shown(meta)}")
    dtype = np.dtype(meta["dtype"])
    n_features = integer(meta["n_features"], f"{where}: n_features", 1, MOST_FEATURES)
    if meta["layout"] == "dense":
        values = _array(arrays, prefix, None, 2, where, (n, n_features))
        return DenseRows(_stored_as(values, dtype, where), dtype)
    indptr = _array(arrays, f"{prefix}.indptr", "<i8", 1, where, (n + 1,))
    if indptr[0] != 0 or (np.diff(indptr) < 0).any():
        raise ValueError(f"{where}: the CSR row pointers must start at 0 and never decrease")
    nnz = int(indptr[-1])
    indices = _in_range(_array(arrays, f"{prefix}.indices", "<i4", 1, where, (nnz,)), n_features, "column", where)
    data = _stored_as(_array(arrays, f"{prefix}.data", None, 1, where, (nnz,)), dtype, where)
    return SparseRows(data, indices, indptr, n_features, dtype)


def _array(arrays: dict[str, AnyArray], name: str, dtype: str | tuple[str, ...] | None, ndim: int, where: str,
           shape: tuple[int | None, ...] | None = None) -> AnyArray:
    """arrays[name], checked: its dtype (one of them; None: any number), dimensions and shape
    (None: any size)."""
    array = arrays.get(name)
    if array is None:
        raise ValueError(f"{where}: no array {name}")
    dtypes = (dtype,) if isinstance(dtype, str) else dtype
    if (array.dtype.str not in dtypes if dtypes else array.dtype.kind not in "biuf") or array.ndim != ndim \
            or (shape and any(want is not None and got != want for got, want in zip(array.shape, shape, strict=True))):
        raise ValueError(f"{where}: {name} must be {' or '.join(dtypes) if dtypes else 'numbers'} of shape "
                         f"{tuple('any' if size is None else size for size in shape or (None,) * ndim)}; "
                         f"got {array.dtype} of shape {array.shape}")
    return array


def _stored_as(values: AnyArray, dtype: np.dtype[Any], where: str) -> AnyArray:
    if not np.can_cast(values.dtype, dtype, "safe"):
        raise ValueError(f"{where}: rows stored as {values.dtype} cannot go back to {dtype} exactly")
    _finite(values, f"{where}: the feature values")
    return values


def _in_range(values: AnyArray, stop: int, what: str, where: str) -> AnyArray:
    if len(values) and (values.min() < 0 or values.max() >= stop):
        raise ValueError(f"{where}: each {what} must be from 0 to {stop - 1:,}")
    return values


def _finite(values: AnyArray, what: str) -> None:
    if values.dtype.kind == "f" and not np.isfinite(values).all():
        raise ValueError(f"{what} must be finite")


def _ids(data: AnyArray, where: str) -> list[Id]:
    try:
        ids = json.loads(data.tobytes())
    except (ValueError, RecursionError) as error:  # a bad UTF-8 byte, an integer of 5,000 digits
        raise ValueError(f"{where}: the ids are not JSON ({str(error)[:100]})") from None
    if not isinstance(ids, list) or not all(type(key) is str or type(key) is int for key in ids):
        raise ValueError(f"{where}: the ids must be a list of strings and integers; got {shown(ids)}")
    if len(set(ids)) != len(ids):
        raise ValueError(f"{where}: an id is listed twice")
    return ids
