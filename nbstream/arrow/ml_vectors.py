"""Spark ML vectors (``pyspark.ml.linalg.VectorUDT``) as they reach Arrow: one struct per row,
``struct<type: int8, size: int32, indices: list<int32>, values: list<double>>``, where type 1 is
a dense vector (its values) and type 0 a sparse one (its size, and the indices and values of
its nonzero entries). The vector encoder reads them as it reads list columns, so a Spark ML
pipeline's ``features`` column is one ``--features`` column."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from ..utils.ndarrays import AnyArray, BoolArray, Features, IntArray
from ..utils.validation import LARGEST_VALUE
from .arrays import is_list_type
from .problems import RowProblems, flag_values

_FIELDS = {"type": pa.types.is_int8, "size": pa.types.is_int32, "indices": pa.types.is_list,
           "values": pa.types.is_list}
_SPARSE, _DENSE = 0, 1
DENSE_UP_TO = 4_096  # features: wider vectors of which some are sparse stay sparse (CSR)


def is_ml_vector_type(arrow_type: pa.DataType) -> bool:
    """Whether a column of this type holds Spark ML vectors."""
    if not pa.types.is_struct(arrow_type) or {field.name for field in arrow_type} != set(_FIELDS):
        return False
    return all(_FIELDS[field.name](field.type) for field in arrow_type)


def is_vector_type(arrow_type: pa.DataType) -> bool:
    """Whether one column of this type is meant to hold all the features: lists or ML vectors."""
    return is_list_type(arrow_type) or is_ml_vector_type(arrow_type)


def _fields(column: pa.StructArray) -> dict[str, pa.Array]:
    """The struct's fields by name, sliced as the column is."""
    return {field.name: array for field, array in zip(column.type, column.flatten(), strict=True)}


def _flat(lists: pa.ListArray) -> tuple[IntArray, AnyArray]:
    """(offsets from 0, shape (n + 1,); the values they point into) of a list array, sliced or not."""
    offsets = lists.offsets.to_numpy().astype(np.int64)
    values = lists.values.slice(offsets[0], offsets[-1] - offsets[0]).to_numpy(zero_copy_only=False)
    return offsets - offsets[0], values


def vector_widths(column: pa.StructArray) -> IntArray:
    """The width of each vector, shape (n_rows,): a sparse vector's size, a dense one's length."""
    fields = _fields(column)
    kinds = fields["type"].fill_null(_DENSE).to_numpy(zero_copy_only=False)
    sizes = fields["size"].fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
    widths: IntArray = np.where(kinds == _SPARSE, sizes, np.diff(_flat(fields["values"])[0]))
    return widths


def ml_vectors(column: pa.StructArray, width: int, name: str, counts_only: bool, problems: RowProblems) -> Features:
    """The vectors as model input, shape (n_rows, width): a float64 array, or a CSR matrix when
    some vectors are sparse and the width exceeds DENSE_UP_TO. Rows of another width, or with a
    NaN, infinite or (counts_only) negative value, are flagged."""
    import scipy.sparse

    n = len(column)
    widths = vector_widths(column)
    wrong = widths != width
    if wrong.any():
        problems.flag(wrong, name, np.char.add(np.char.add("vector has ", widths.astype(str)),
                                               f" values; expected {width}"))
    fields = _fields(column)
    kinds = fields["type"].fill_null(_DENSE).to_numpy(zero_copy_only=False)
    value_offsets, values = _flat(fields["values"])
    sparse = kinds == _SPARSE
    if not sparse.any() and not problems.bad.any():  # every vector dense, of the width: the values in order
        dense: AnyArray = values.astype(np.float64, copy=False).reshape(n, width)
        flag_values(dense, name, counts_only, problems)
        return dense
    lengths = np.diff(value_offsets)
    row_of_value = np.repeat(np.arange(n), lengths)
    columns = np.arange(len(values)) - value_offsets[:-1][row_of_value]  # a dense value's position
    if sparse.any():
        index_offsets, indices = _flat(fields["indices"])
        in_sparse = sparse[row_of_value]
        columns[in_sparse] = indices[index_offsets[:-1][row_of_value[in_sparse]] + columns[in_sparse]]
        outside = (columns < 0) | (columns >= width)
        problems.flag(np.bincount(row_of_value[outside], minlength=n) > 0, name, "vector index out of range")
    good = ~problems.bad
    counts = np.where(good, lengths, 0)
    taken = good[row_of_value]
    rows, columns = row_of_value[taken], columns[taken]
    stored = values[taken]
    _flag_stored_values(stored, rows, n, name, counts_only, problems)
    if sparse.any() and width > DENSE_UP_TO:
        indptr = np.concatenate([[0], np.cumsum(counts)])
        return scipy.sparse.csr_matrix((stored, columns, indptr), shape=(n, width))
    X: AnyArray = np.zeros((n, width))
    X[rows, columns] = stored
    return X


def _flag_stored_values(values: AnyArray, rows: IntArray, n: int, name: str, counts_only: bool,
                        problems: RowProblems) -> None:
    """Flag the rows holding a NaN, infinite, too large or (counts_only) negative value."""
    def rows_where(bad: BoolArray) -> BoolArray:
        return np.bincount(rows[bad], minlength=n) > 0 if bad.any() else np.zeros(n, dtype=bool)

    problems.flag(rows_where(~np.isfinite(values)), name, "NaN or infinite value")
    problems.flag(rows_where(np.abs(values) > LARGEST_VALUE), name, f"value beyond ±{LARGEST_VALUE:g}")
    if counts_only:
        problems.flag(rows_where(values < 0), name, "negative value (this model needs counts)")
