"""Numeric features: one list column of numbers (``vector``), or numeric columns (``columns``)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from ..naive_bayes.state import is_int
from ..utils.ndarrays import AnyArray, Features, IntArray
from .arrays import is_list_type, is_numeric_type, numpy_values
from .ml_vectors import is_ml_vector_type, ml_vectors, vector_widths
from .problems import FeatureError, RowProblems, flag_values
from .spec import FeatureEncoder, FeatureSpec, names_by_row


class VectorEncoder(FeatureEncoder):
    """One list or fixed-size-list column of numbers, read in its own dtype (MNIST's uint8
    pixels stay uint8), or of Spark ML vectors (see ``ml_vectors``). The width is learned from
    the first batch with a non-empty list (its most common length, so one malformed first row
    does not reject the good rows after it) and then required."""

    kind = "vector"
    expected = "a list of numbers or a Spark ML vector"

    def __init__(self, spec: FeatureSpec):
        super().__init__(spec)
        self.width: int | None = None

    @property
    def n_features(self) -> int | None:
        return self.width

    def accepts(self, arrow_type: pa.DataType) -> bool:
        return (is_list_type(arrow_type) and is_numeric_type(arrow_type.value_type)) or is_ml_vector_type(arrow_type)

    def _restore(self, data: dict[str, Any]) -> None:
        width = data.get("n_features")
        if width is not None and not (is_int(width) and width >= 1):
            raise FeatureError(f"the stored list width must be a positive integer; got {width!r}.")
        self.width = width

    def describe(self) -> str:
        return f"list column {self.columns[0]!r} of {self.width} numbers"

    def feature_names(self, batch: pa.RecordBatch, features: IntArray) -> list[dict[int, str]]:
        """Element i of the list column c: "c[i]"."""
        column = self.columns[0]
        return names_by_row(features, lambda row, feature: f"{column}[{feature}]")

    def _encode(self, batch: pa.RecordBatch, problems: RowProblems, *, learn: bool, counts_only: bool) -> Features:
        name = self.columns[0]
        column = batch.column(name)
        if is_ml_vector_type(column.type):
            return self._ml_vectors(column, problems, counts_only)
        n = len(column)
        if pa.types.is_fixed_size_list(column.type):
            width = column.type.list_size
            offsets = np.arange(n + 1, dtype=np.int64) * width + column.offset * width
        else:
            offsets = column.offsets.to_numpy().astype(np.int64)
        values = column.values
        lengths = np.diff(offsets)
        if self.width is None:  # the most common non-zero length of the first usable batch
            lengths_seen, counts = np.unique(lengths[~problems.bad & (lengths > 0)], return_counts=True)
            if not lengths_seen.size:
                problems.flag(lengths == 0, name, "empty list (a model needs at least one feature)")
                return np.zeros((n, 0))
            self.width = int(lengths_seen[np.argmax(counts)])
        width = self.width
        wrong = lengths != width
        if wrong.any():
            problems.flag(wrong, name, np.char.add(np.char.add("list has ", lengths.astype(str)),
                                                   f" values; expected {width}"))
        if values.null_count:
            nulls_before = np.concatenate([[0], np.cumsum(values.is_null().to_numpy(zero_copy_only=False))])
            problems.flag(nulls_before[offsets[1:]] > nulls_before[offsets[:-1]], name, "null inside the list")
        flat = numpy_values(values)
        if not problems.bad.any() and offsets[-1] - offsets[0] == n * width:
            X = flat[offsets[0]:offsets[-1]].reshape(n, width)
        else:
            X = np.zeros((n, width), dtype=flat.dtype)
            good = ~problems.bad
            X[good] = flat[offsets[:-1][good, None] + np.arange(width)]
        flag_values(X, name, counts_only, problems)
        return X


    def _ml_vectors(self, column: pa.StructArray, problems: RowProblems, counts_only: bool) -> Features:
        if self.width is None:  # the most common width among the first usable batch's vectors
            widths = vector_widths(column)[~problems.bad]
            seen, counts = np.unique(widths[widths > 0], return_counts=True)
            if not seen.size:
                problems.flag(np.ones(len(column), dtype=bool), self.columns[0],
                              "empty vector (a model needs at least one feature)")
                return np.zeros((len(column), 0))
            self.width = int(seen[np.argmax(counts)])
        return ml_vectors(column, self.width, self.columns[0], counts_only, problems)


class NumericColumnsEncoder(FeatureEncoder):
    """Several numeric columns, one feature each."""

    kind = "columns"
    expected = "a numeric column"

    def accepts(self, arrow_type: pa.DataType) -> bool:
        return is_numeric_type(arrow_type)

    def describe(self) -> str:
        return f"numeric columns {self.columns}"

    def feature_names(self, batch: pa.RecordBatch, features: IntArray) -> list[dict[int, str]]:
        """Each feature by its column's name."""
        columns = self.columns
        return names_by_row(features, lambda row, feature: columns[feature])

    def _encode(self, batch: pa.RecordBatch, problems: RowProblems, *, learn: bool, counts_only: bool) -> AnyArray:
        X = np.column_stack([numpy_values(batch.column(name)) for name in self.columns])
        for i, name in enumerate(self.columns):
            flag_values(X[:, i:i + 1], name, counts_only, problems)
        return X
