"""Key columns: which model of a ``KeyedNB`` each row belongs to, read from an Arrow column.

A key is a string of 1 to MOST_KEY_BYTES bytes of UTF-8 or a 64-bit integer. A row whose key is
null, an empty or longer string, not valid UTF-8 or an integer beyond 64 bits is a bad row,
flagged in ``problems`` as labels are.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..stats.keyed_counts import Key
from .arrays import is_string_type, with_valid_utf8
from .problems import FeatureError, RowProblems

MOST_KEY_BYTES = 1_024  # a longer key names no key (a Kafka record key, a request's, a column's)


def check_key_type(schema: pa.Schema, column: str, source: str) -> type:
    """str or int: what the key column holds; FeatureError naming ``source`` when it is missing or
    holds neither strings nor integers."""
    if column not in schema.names:
        raise FeatureError(f"{source}: key column {column!r} not found; columns are {schema.names}.")
    kind = schema.field(column).type
    if pa.types.is_dictionary(kind):
        kind = kind.value_type
    if not (is_string_type(kind) or pa.types.is_integer(kind)):
        raise FeatureError(f"{source}: key column {column!r} has type {schema.field(column).type}; a key is a "
                           f"string or an integer.")
    return str if is_string_type(kind) else int


def extract_keys(batch: pa.RecordBatch, column: str, problems: RowProblems) -> list[Key]:
    """Each row's key, shape (n_rows,) as a list of str or int (placeholders where the row is
    flagged in ``problems``)."""
    values = batch.column(column)
    if pa.types.is_dictionary(values.type):
        values = values.cast(values.type.value_type)
    present = values.is_valid().to_numpy(zero_copy_only=False) if values.null_count else \
        np.ones(len(values), dtype=bool)
    problems.flag(~present, column, "null key")
    if pa.types.is_integer(values.type):
        numbers = pc.fill_null(values, 0).to_numpy(zero_copy_only=False)
        if numbers.dtype == np.uint64:
            problems.flag(numbers > np.iinfo(np.int64).max, column, "a key beyond 64-bit signed integers")
        return [int(key) for key in numbers.tolist()]
    values, invalid = with_valid_utf8(values)
    if invalid is not None:
        problems.flag(invalid, column, "the key is not valid UTF-8")
    texts: list[Key] = pc.fill_null(values, "").to_pylist()
    sizes = pc.binary_length(pc.fill_null(values, "")).to_numpy(zero_copy_only=False)
    problems.flag(sizes == 0, column, "empty key")  # (null and invalid rows are flagged already)
    problems.flag(sizes > MOST_KEY_BYTES, column, f"a key of over {MOST_KEY_BYTES:,} bytes")
    return texts
