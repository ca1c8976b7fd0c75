"""Categorical features: string, integer or boolean columns mapped to stable category codes."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..utils.ndarrays import IntArray
from .arrays import is_string_type
from .problems import FeatureError, RowProblems
from .spec import FeatureEncoder, FeatureSpec, names_by_row

UNSEEN_CATEGORY = np.iinfo(np.int32).max  # a code no model has a table entry for


class CategoricalEncoder(FeatureEncoder):
    """Each column's values get codes 0, 1, 2, ... in order of first appearance while
    learning; a value never learned gets ``UNSEEN_CATEGORY``.

    categories : one {value: code} mapping per column (values as strings)
    """

    kind = "categorical"
    expected = "a string, integer or boolean column"

    def __init__(self, spec: FeatureSpec):
        super().__init__(spec)
        self.categories: list[dict[str, int]] = [{} for _ in spec.columns]

    def accepts(self, arrow_type: pa.DataType) -> bool:
        return bool(is_string_type(arrow_type) or pa.types.is_integer(arrow_type) or pa.types.is_boolean(arrow_type)
                    or pa.types.is_dictionary(arrow_type))

    def _learned_json(self) -> dict[str, Any]:
        return {"categories": [list(mapping) for mapping in self.categories]}  # code = position

    def _restore(self, data: dict[str, Any]) -> None:
        """One list of category strings per column (a list too short would leave columns unencoded)."""
        stored = data.get("categories")
        if not isinstance(stored, list) or len(stored) != len(self.columns) \
                or not all(isinstance(values, list) and all(isinstance(v, str) for v in values) for values in stored):
            raise FeatureError(f"the stored categories must be one list of strings for each of the "
                               f"{len(self.columns)} columns {self.columns}.")
        self.categories = [{value: code for code, value in enumerate(values)} for values in stored]

    def describe(self) -> str:
        sizes = ", ".join(f"{c} ({len(m)})" for c, m in zip(self.columns, self.categories, strict=True))
        return f"categorical columns (categories seen): {sizes}"

    def feature_names(self, batch: pa.RecordBatch, features: IntArray) -> list[dict[int, str]]:
        """Column c of value v in the row: "c=v", v spelled as the categories key it."""
        values = [batch.column(name).to_pylist() for name in self.columns]
        return names_by_row(features, lambda row, feature: f"{self.columns[feature]}={values[feature][row]}")

    def _encode(self, batch: pa.RecordBatch, problems: RowProblems, *, learn: bool, counts_only: bool) -> IntArray:
        codes = np.empty((batch.num_rows, len(self.columns)), dtype=np.int64)
        for i, (name, mapping) in enumerate(zip(self.columns, self.categories, strict=True)):
            column = batch.column(name)
            encoded = column if pa.types.is_dictionary(column.type) else pc.dictionary_encode(column)
            # One code per distinct value, plus the unseen code that null rows (flagged already) point to.
            lookup = np.full(len(encoded.dictionary) + 1, UNSEEN_CATEGORY, dtype=np.int64)
            for j, value in enumerate(encoded.dictionary.to_pylist()):
                key = str(value)
                if key not in mapping and learn:
                    mapping[key] = len(mapping)
                lookup[j] = mapping.get(key, UNSEEN_CATEGORY)
            indices = pc.fill_null(encoded.indices, len(encoded.dictionary)) if encoded.indices.null_count \
                else encoded.indices
            codes[:, i] = lookup[indices.to_numpy(zero_copy_only=False).astype(np.int64)]
        return codes

    def align(self, other: CategoricalEncoder) -> list[IntArray]:
        """Extend this encoder's categories with the other's; for each column, where each of
        the other's codes sits here (to re-map a model trained with ``other``)."""
        where = []
        for mine, theirs in zip(self.categories, other.categories, strict=True):
            for value in theirs:
                mine.setdefault(value, len(mine))
            where.append(np.array([mine[value] for value in theirs], dtype=np.int64))
        return where
