"""Text features: one string column, lowercased word tokens hashed into 2**hash_bits counts."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from ..utils.ndarrays import Features, IntArray
from .arrays import is_string_type
from .hashing import HASH_SCHEME, hashed_counts, hashed_names
from .problems import FeatureError, RowProblems
from .spec import FeatureEncoder, names_by_row


class TextEncoder(FeatureEncoder):
    """Word n-gram counts of a string column as a CSR matrix; nothing is learned."""

    kind = "text"
    expected = "a string column"

    @property
    def n_features(self) -> int:
        return 1 << self.spec.hash_bits

    def accepts(self, arrow_type: pa.DataType) -> bool:
        return is_string_type(arrow_type)

    def _learned_json(self) -> dict[str, Any]:
        return {"hash_bits": self.spec.hash_bits, "ngram_max": self.spec.ngram_max, "hash_scheme": HASH_SCHEME}

    def _restore(self, data: dict[str, Any]) -> None:
        if data.get("hash_scheme") != HASH_SCHEME:
            raise FeatureError(f"text features were hashed with {data.get('hash_scheme')!r}; "
                               f"this version hashes with {HASH_SCHEME!r}.")

    def describe(self) -> str:
        return (f"text column {self.columns[0]!r}: word {self.spec.ngram_max}-grams hashed into "
                f"2^{self.spec.hash_bits} features")

    def feature_names(self, batch: pa.RecordBatch, features: IntArray) -> list[dict[int, str]]:
        """A hashed column by the row's words and n-grams that hash to it (``hashed_names``); one the
        row has none of (what a BernoulliNB counts absent) as "c[i]", of the text column c."""
        column = self.columns[0]
        names = hashed_names(batch.column(column), self.spec.hash_bits, self.spec.ngram_max, columns=features)
        return names_by_row(features, lambda row, feature: names[row].get(feature) or f"{column}[{feature}]")

    def _encode(self, batch: pa.RecordBatch, problems: RowProblems, *, learn: bool, counts_only: bool) -> Features:
        return hashed_counts(batch.column(self.columns[0]), self.spec.hash_bits, self.spec.ngram_max)
