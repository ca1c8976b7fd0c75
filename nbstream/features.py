"""From Arrow record batches to model input: the feature specification.

A spec says which columns hold the features and how to read them; it is stored in the
snapshot, so prediction needs no feature flags. Four kinds:

- ``vector``: one list or fixed-size-list column of numbers (MNIST: 784 uint8 pixels)
- ``columns``: several numeric columns, one feature each
- ``text``: one string column, hashed token counts in 2**hash_bits sparse columns
- ``categorical``: string (or integer) columns, each mapped to stable category codes

Row-level problems (a null, a list of the wrong length, NaN, a negative count) are not
raised here: ``extract`` reports them per row in ``RowProblems`` so the caller can stop
with the file, column and row, or set the rows aside. Schema problems (a missing column, a
wrong type) are raised as ``FeatureError``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .hashing import HASH_SCHEME, hashed_counts

UNSEEN_CATEGORY = np.iinfo(np.int32).max  # a code no model has a table entry for


class FeatureError(ValueError):
    """The data does not have the columns or types the feature spec needs."""


class RowProblems:
    """The first problem found in each row of a batch, if any."""

    def __init__(self, n_rows: int):
        self.bad = np.zeros(n_rows, dtype=bool)
        self.column = np.empty(n_rows, dtype=object)
        self.message = np.empty(n_rows, dtype=object)

    def flag(self, rows: np.ndarray, column: str, message) -> None:
        """Record ``message`` (a string, or an array of one string per row of the batch)
        for the flagged rows that have no problem yet."""
        new = rows & ~self.bad
        if new.any():
            self.column[new] = column
            self.message[new] = message if isinstance(message, str) else np.asarray(message, dtype=object)[new]
            self.bad |= new

    def any(self) -> bool:
        return bool(self.bad.any())

    def first(self) -> tuple[int, str, str]:
        row = int(np.argmax(self.bad))
        return row, self.column[row], self.message[row]


def _is_numeric(arrow_type: pa.DataType) -> bool:
    return pa.types.is_integer(arrow_type) or pa.types.is_floating(arrow_type) or pa.types.is_boolean(arrow_type)


def _numpy(array: pa.Array) -> np.ndarray:
    """Values of a numeric Arrow array in their own dtype, nulls as 0 (flag them first)."""
    if array.null_count:
        array = pc.fill_null(array, False if pa.types.is_boolean(array.type) else 0)
    return array.to_numpy(zero_copy_only=False)


def _flag_values(X: np.ndarray, column: str, counts_only: bool, problems: RowProblems) -> None:
    if X.dtype.kind == "f":
        problems.flag(~np.isfinite(X).all(axis=1), column, "NaN or infinite value")
    if counts_only and X.dtype.kind in "if":
        problems.flag((X < 0).any(axis=1), column, "negative value (this model needs counts)")


@dataclass
class FeatureSpec:
    kind: str
    columns: list[str]
    n_features: int | None = None
    hash_bits: int = 20
    ngram_max: int = 1
    categories: list[dict[str, int]] = field(default_factory=list)

    @classmethod
    def vector(cls, column: str) -> "FeatureSpec":
        return cls("vector", [column])

    @classmethod
    def numeric_columns(cls, columns: list[str]) -> "FeatureSpec":
        return cls("columns", list(columns), n_features=len(columns))

    @classmethod
    def text(cls, column: str, hash_bits: int = 20, ngram_max: int = 1) -> "FeatureSpec":
        if not 1 <= hash_bits <= 31:
            raise ValueError(f"hash_bits must be between 1 and 31; got {hash_bits}.")
        if ngram_max < 1:
            raise ValueError(f"ngram_max must be at least 1; got {ngram_max}.")
        return cls("text", [column], n_features=1 << hash_bits, hash_bits=hash_bits, ngram_max=ngram_max)

    @classmethod
    def categorical(cls, columns: list[str]) -> "FeatureSpec":
        return cls("categorical", list(columns), n_features=len(columns), categories=[{} for _ in columns])

    # ---- persistence -----------------------------------------------------------------
    def to_json(self) -> dict:
        data = {"kind": self.kind, "columns": self.columns, "n_features": self.n_features}
        if self.kind == "text":
            data.update(hash_bits=self.hash_bits, ngram_max=self.ngram_max, hash_scheme=HASH_SCHEME)
        if self.kind == "categorical":
            data["categories"] = [list(mapping) for mapping in self.categories]  # code = position
        return data

    @classmethod
    def from_json(cls, data: dict) -> "FeatureSpec":
        if data.get("kind") == "text" and data.get("hash_scheme") != HASH_SCHEME:
            raise FeatureError(f"text features were hashed with {data.get('hash_scheme')!r}; "
                               f"this version hashes with {HASH_SCHEME!r}.")
        categories = [{value: code for code, value in enumerate(values)} for values in data.get("categories", [])]
        return cls(data["kind"], list(data["columns"]), data.get("n_features"), data.get("hash_bits", 20),
                   data.get("ngram_max", 1), categories)

    def describe(self) -> str:
        if self.kind == "text":
            return (f"text column {self.columns[0]!r}: word {self.ngram_max}-grams hashed into "
                    f"2^{self.hash_bits} features")
        if self.kind == "vector":
            return f"list column {self.columns[0]!r} of {self.n_features} numbers"
        if self.kind == "categorical":
            sizes = ", ".join(f"{c} ({len(m)})" for c, m in zip(self.columns, self.categories))
            return f"categorical columns (categories seen): {sizes}"
        return f"numeric columns {self.columns}"

    def same_layout(self, other: "FeatureSpec") -> bool:
        """Whether models over the two specs can merge (category codes can be re-mapped)."""
        mine, theirs = self.to_json(), other.to_json()
        mine.pop("categories", None), theirs.pop("categories", None)
        return mine == theirs

    # ---- reading batches ---------------------------------------------------------------
    def check_schema(self, schema: pa.Schema, source: str) -> None:
        """Raise FeatureError naming the source and column when a column is missing or mistyped."""
        for name in self.columns:
            if name not in schema.names:
                raise FeatureError(f"{source}: column {name!r} not found; columns are {schema.names}.")
            arrow_type = schema.field(name).type
            if self.kind == "vector":
                ok = (pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type)
                      or pa.types.is_fixed_size_list(arrow_type)) and _is_numeric(arrow_type.value_type)
                expected = "a list of numbers"
            elif self.kind == "columns":
                ok, expected = _is_numeric(arrow_type), "a numeric column"
            elif self.kind == "text":
                ok = pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type)
                expected = "a string column"
            else:
                ok = (pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type)
                      or pa.types.is_integer(arrow_type) or pa.types.is_boolean(arrow_type)
                      or pa.types.is_dictionary(arrow_type))
                expected = "a string, integer or boolean column"
            if not ok:
                raise FeatureError(f"{source}: column {name!r} has type {arrow_type}; expected {expected}.")

    def extract(self, batch: pa.RecordBatch, *, learn: bool, counts_only: bool = False,
                problems: RowProblems | None = None):
        """Model input for a batch.

        learn : whether unknown categories get new codes (training) or the unseen code.
        problems : problems already found in these rows (by a message decoder), if any.
        Returns (X, problems): X of shape (n_rows, n_features), a numpy array in the
        column's own dtype or a CSR matrix for text; problems: a RowProblems.
        """
        problems = problems or RowProblems(batch.num_rows)
        for name in self.columns:
            column = batch.column(name)
            if column.null_count:
                problems.flag(column.is_null().to_numpy(zero_copy_only=False), name, "null value")
        reader = {"vector": self._vector, "columns": self._numeric_columns,
                  "text": self._text, "categorical": self._categorical}[self.kind]
        return reader(batch, problems, learn=learn, counts_only=counts_only), problems

    def _vector(self, batch, problems, *, learn, counts_only):
        name = self.columns[0]
        column = batch.column(name)
        n = len(column)
        if pa.types.is_fixed_size_list(column.type):
            width = column.type.list_size
            offsets = np.arange(n + 1, dtype=np.int64) * width + column.offset * width
        else:
            offsets = column.offsets.to_numpy().astype(np.int64)
        values = column.values
        lengths = np.diff(offsets)
        if self.n_features is None:
            valid = ~problems.bad
            if not valid.any():
                return np.zeros((n, 0))
            self.n_features = int(lengths[np.argmax(valid)])
        width = self.n_features
        wrong = lengths != width
        if wrong.any():
            problems.flag(wrong, name, np.char.add(np.char.add("list has ", lengths.astype(str)),
                                                   f" values; expected {width}"))
        if values.null_count:
            nulls_before = np.concatenate([[0], np.cumsum(values.is_null().to_numpy(zero_copy_only=False))])
            problems.flag(nulls_before[offsets[1:]] > nulls_before[offsets[:-1]], name, "null inside the list")
        flat = _numpy(values)
        if not problems.bad.any() and offsets[-1] - offsets[0] == n * width:
            X = flat[offsets[0]:offsets[-1]].reshape(n, width)
        else:
            X = np.zeros((n, width), dtype=flat.dtype)
            good = ~problems.bad
            X[good] = flat[offsets[:-1][good, None] + np.arange(width)]
        _flag_values(X, name, counts_only, problems)
        return X

    def _numeric_columns(self, batch, problems, *, learn, counts_only):
        X = np.column_stack([_numpy(batch.column(name)) for name in self.columns])
        for i, name in enumerate(self.columns):
            _flag_values(X[:, i:i + 1], name, counts_only, problems)
        return X

    def _text(self, batch, problems, *, learn, counts_only):
        return hashed_counts(batch.column(self.columns[0]), self.hash_bits, self.ngram_max)

    def _categorical(self, batch, problems, *, learn, counts_only):
        codes = np.empty((batch.num_rows, len(self.columns)), dtype=np.int64)
        for i, (name, mapping) in enumerate(zip(self.columns, self.categories)):
            column = batch.column(name)
            encoded = column if pa.types.is_dictionary(column.type) else pc.dictionary_encode(column)
            lookup = np.empty(len(encoded.dictionary), dtype=np.int64)
            for j, value in enumerate(encoded.dictionary.to_pylist()):  # distinct values only
                key = str(value)
                if key not in mapping and learn:
                    mapping[key] = len(mapping)
                lookup[j] = mapping.get(key, UNSEEN_CATEGORY)
            codes[:, i] = lookup[_numpy(encoded.indices).astype(np.int64)]
        return codes

    def align_categories(self, other: "FeatureSpec") -> list[np.ndarray]:
        """Extend this spec's categories with the other's; for each column, where each of the
        other's codes sits in this spec (to re-map a model trained with ``other``)."""
        where = []
        for mine, theirs in zip(self.categories, other.categories):
            for value in theirs:
                mine.setdefault(value, len(mine))
            where.append(np.array([mine[value] for value in theirs], dtype=np.int64))
        return where


def label_values(labels: pa.Array, column: str, problems: RowProblems) -> tuple[np.ndarray, np.ndarray]:
    """(labeled, y): which rows carry a label, and the labels as numpy (strings as str,
    numbers as numbers; placeholders where unlabeled). A NaN label is flagged as a problem."""
    labeled = labels.is_valid().to_numpy(zero_copy_only=False) if labels.null_count else \
        np.ones(len(labels), dtype=bool)
    if pa.types.is_null(labels.type):
        return labeled, np.zeros(len(labels))
    if pa.types.is_string(labels.type) or pa.types.is_large_string(labels.type) or pa.types.is_dictionary(labels.type):
        return labeled, np.asarray(pc.fill_null(labels.cast(pa.string()), "").to_numpy(zero_copy_only=False),
                                   dtype=str)
    if not _is_numeric(labels.type):
        raise FeatureError(f"label column {column!r} has type {labels.type}; expected strings or numbers.")
    y = _numpy(labels)
    if y.dtype.kind == "f":
        problems.flag(np.isnan(y), column, "NaN label")
    return labeled, y


def extract_labels(batch: pa.RecordBatch, column: str, problems: RowProblems) -> np.ndarray:
    """The label column of a batch where every row needs a label: nulls are flagged."""
    labeled, y = label_values(batch.column(column), column, problems)
    problems.flag(~labeled, column, "null label")
    return y
