"""Small helpers over Arrow types and arrays shared by the feature encoders and label readers."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..utils.ndarrays import AnyArray, BoolArray


def is_numeric_type(arrow_type: pa.DataType) -> bool:
    return bool(pa.types.is_integer(arrow_type) or pa.types.is_floating(arrow_type) or pa.types.is_boolean(arrow_type))


def is_list_type(arrow_type: pa.DataType) -> bool:
    return bool(pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type)
                or pa.types.is_fixed_size_list(arrow_type))


def is_string_type(arrow_type: pa.DataType) -> bool:
    return bool(pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type))


def with_valid_utf8(array: pa.Array) -> tuple[pa.Array, BoolArray | None]:
    """A string array whose invalid UTF-8 values are replaced by empty strings, and which rows
    those were, shape (n_rows,) of bool (None when every value is valid, the usual case,
    checked in one pass of Arrow's own validation)."""
    if not is_string_type(array.type):
        return array, None
    try:
        array.validate(full=True)
        return array, None
    except pa.ArrowInvalid:
        pass
    binary_type = pa.large_binary() if pa.types.is_large_string(array.type) else pa.binary()
    raw = array.view(binary_type)
    bad = np.array([value is not None and not _is_utf8(value) for value in raw.to_pylist()], dtype=bool)
    return pc.if_else(pa.array(bad), pa.scalar(b"", binary_type), raw).view(array.type), bad


def _is_utf8(value: bytes) -> bool:
    try:
        value.decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False


def numpy_values(array: pa.Array) -> AnyArray:
    """Values of a numeric Arrow array in their own dtype, nulls as 0 (flag them first)."""
    if pa.types.is_null(array.type):
        return np.zeros(len(array))
    if array.null_count:
        array = pc.fill_null(array, False if pa.types.is_boolean(array.type) else 0)
    values: AnyArray = array.to_numpy(zero_copy_only=False)
    return values
