"""Small helpers over Arrow types and arrays shared by the feature encoders and label readers."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


def is_numeric_type(arrow_type: pa.DataType) -> bool:
    return pa.types.is_integer(arrow_type) or pa.types.is_floating(arrow_type) or pa.types.is_boolean(arrow_type)


def is_list_type(arrow_type: pa.DataType) -> bool:
    return pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type) or pa.types.is_fixed_size_list(arrow_type)


def is_string_type(arrow_type: pa.DataType) -> bool:
    return pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type)


def numpy_values(array: pa.Array) -> np.ndarray:
    """Values of a numeric Arrow array in their own dtype, nulls as 0 (flag them first)."""
    if pa.types.is_null(array.type):
        return np.zeros(len(array))
    if array.null_count:
        array = pc.fill_null(array, False if pa.types.is_boolean(array.type) else 0)
    return array.to_numpy(zero_copy_only=False)
