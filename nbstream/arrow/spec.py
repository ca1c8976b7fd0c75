"""The feature specification (what the user declared) and the encoder base (what reading data learned).

A ``FeatureSpec`` names the columns and how to read them; it never changes. Its
``encoder()`` is a ``FeatureEncoder`` of the spec's kind, which turns Arrow record batches
into model input and keeps what it learns while doing so (a list column's width, category
codes). The encoder's JSON (spec plus learned state) is what a snapshot stores, so
prediction needs no feature flags.

Row-level problems (a null, a list of the wrong length, NaN, a negative count) are not
raised: ``encode`` reports them per row in ``RowProblems`` so the caller can stop with the
file, column and row, or set the rows aside. Schema problems (a missing column, a wrong
type) raise ``FeatureError``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, ClassVar, Self

import pyarrow as pa

from ..naive_bayes.state import is_int
from ..utils.ndarrays import Features, IntArray
from .arrays import with_valid_utf8
from .problems import FeatureError, RowProblems

LONGEST_NGRAMS = 5  # a text's n-grams grow with their length, and few models gain past 3


@dataclass(frozen=True)
class FeatureSpec:
    """The features as declared.

    kind : "vector" (one list column of numbers), "columns" (numeric columns, one feature
        each), "text" (one string column: hashed token counts in 2**hash_bits columns) or
        "categorical" (string or integer columns mapped to category codes)
    columns : the columns read
    hash_bits, ngram_max : text only
    """
    kind: str
    columns: tuple[str, ...]
    hash_bits: int = 20
    ngram_max: int = 1

    def __post_init__(self) -> None:
        if self.kind not in FeatureEncoder.kinds:
            raise ValueError(f"unknown feature kind {self.kind!r}; one of {sorted(FeatureEncoder.kinds)}.")
        if not all(isinstance(column, str) for column in self.columns):
            raise ValueError(f"columns must be named by strings; got {list(self.columns)}.")
        if not is_int(self.hash_bits) or not 1 <= self.hash_bits <= 31:
            raise ValueError(f"hash_bits must be between 1 and 31 (an integer); got {self.hash_bits!r}.")
        if not is_int(self.ngram_max) or not 1 <= self.ngram_max <= LONGEST_NGRAMS:
            raise ValueError(f"ngram_max must be 1 to {LONGEST_NGRAMS} (an integer); got {self.ngram_max!r}.")

    @classmethod
    def vector(cls, column: str) -> FeatureSpec:
        return cls("vector", (column,))

    @classmethod
    def numeric_columns(cls, columns: Iterable[str]) -> FeatureSpec:
        return cls("columns", tuple(columns))

    @classmethod
    def text(cls, column: str, hash_bits: int = 20, ngram_max: int = 1) -> FeatureSpec:
        return cls("text", (column,), hash_bits=hash_bits, ngram_max=ngram_max)

    @classmethod
    def categorical(cls, columns: Iterable[str]) -> FeatureSpec:
        return cls("categorical", tuple(columns))

    def encoder(self) -> FeatureEncoder:
        """A fresh encoder for this spec: nothing learned yet."""
        return FeatureEncoder.kinds[self.kind](self)


class FeatureEncoder:
    """Turns Arrow batches into model input for one feature spec; subclasses, one per kind,
    supply the column check, the encoding and any learned state."""

    kind: ClassVar[str]
    expected: ClassVar[str]  # the column type it reads, for schema errors
    kinds: ClassVar[dict[str, type[FeatureEncoder]]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        FeatureEncoder.kinds[cls.kind] = cls

    def __init__(self, spec: FeatureSpec):
        self.spec = spec

    @property
    def columns(self) -> list[str]:
        return list(self.spec.columns)

    @property
    def n_features(self) -> int | None:
        """Columns of the model input; None while not yet known (a list width not seen yet)."""
        return len(self.spec.columns)

    # ---- what each kind supplies --------------------------------------------------------
    def accepts(self, arrow_type: pa.DataType) -> bool:
        raise NotImplementedError

    def _encode(self, batch: pa.RecordBatch, problems: RowProblems, *, learn: bool, counts_only: bool) -> Features:
        raise NotImplementedError

    def _learned_json(self) -> dict[str, Any]:
        """Kind-specific settings and learned state for the snapshot."""
        return {}

    def _restore(self, data: dict[str, Any]) -> None:
        """Take back what ``_learned_json`` stored."""

    def describe(self) -> str:
        raise NotImplementedError

    def feature_names(self, batch: pa.RecordBatch, features: IntArray) -> list[dict[int, str]]:
        """For each row of a batch this encoder encodes, the names of some of its features (features
        (n_rows, k), -1 for none), by feature index: what explanations show."""
        raise NotImplementedError

    # ---- shared ---------------------------------------------------------------------------
    def check_schema(self, schema: pa.Schema, source: str) -> None:
        """Raise FeatureError naming the source and column when a column is missing or mistyped."""
        for name in self.spec.columns:
            if name not in schema.names:
                raise FeatureError(f"{source}: column {name!r} not found; columns are {schema.names}.")
            arrow_type = schema.field(name).type
            if not self.accepts(arrow_type):
                raise FeatureError(f"{source}: column {name!r} has type {arrow_type}; expected {self.expected}.")

    def encode(self, batch: pa.RecordBatch, *, learn: bool, counts_only: bool = False,
               problems: RowProblems | None = None) -> tuple[Features, RowProblems]:
        """Model input for a batch.

        learn : whether what is new (categories, a first list width) is learned (training)
            or treated as unseen (prediction)
        counts_only : flag negative values (for models whose features are counts)
        problems : problems already found in these rows (by a message decoder), if any
        Returns (X, problems): X of shape (n_rows, n_features), a numpy array in the column's
        own dtype or a CSR matrix for text; problems: a RowProblems.
        """
        problems = problems or RowProblems(batch.num_rows)
        for name in self.spec.columns:
            column = batch.column(name)
            if column.null_count:
                problems.flag(column.is_null().to_numpy(zero_copy_only=False), name, "null value")
            valid, invalid_rows = with_valid_utf8(column)
            if invalid_rows is not None:
                problems.flag(invalid_rows, name, "invalid UTF-8")
                batch = batch.set_column(batch.schema.get_field_index(name), name, valid)
        return self._encode(batch, problems, learn=learn, counts_only=counts_only), problems

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "columns": self.columns, "n_features": self.n_features, **self._learned_json()}

    @staticmethod
    def from_json(data: dict[str, Any]) -> FeatureEncoder:
        """An encoder as a snapshot stored it (spec and learned state)."""
        kind = data.get("kind")
        if kind not in FeatureEncoder.kinds:
            raise FeatureError(f"unknown feature kind {kind!r} in the stored feature spec.")
        spec = FeatureSpec(kind, tuple(data["columns"]), hash_bits=data.get("hash_bits", 20),
                           ngram_max=data.get("ngram_max", 1))
        return FeatureEncoder.kinds[kind].restored(spec, data)

    @classmethod
    def restored(cls, spec: FeatureSpec, data: dict[str, Any]) -> Self:
        """An encoder of this kind for ``spec`` with the learned state ``to_json`` stored."""
        encoder = cls(spec)
        encoder._restore(data)
        return encoder

    def same_layout(self, other: FeatureEncoder) -> bool:
        """Whether models over the two encoders can merge (category codes can be re-mapped)."""
        mine, theirs = self.to_json(), other.to_json()
        mine.pop("categories", None), theirs.pop("categories", None)
        return mine == theirs


def names_by_row(features: IntArray, name: Callable[[int, int], str]) -> list[dict[int, str]]:
    """For each row of features (n_rows, k) (-1 for none), its features' names by index, as
    name(row, feature) gives them."""
    return [{feature: name(row, feature) for feature in listed if feature >= 0}
            for row, listed in enumerate(features.tolist())]
