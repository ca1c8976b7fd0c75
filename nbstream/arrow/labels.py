"""Label columns: Arrow arrays to numpy labels, with missing or unusable labels flagged per row."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..utils.ndarrays import AnyArray, BoolArray
from .arrays import is_numeric_type, is_string_type, numpy_values, with_valid_utf8
from .problems import FeatureError, RowProblems


def label_values(labels: pa.Array, column: str, problems: RowProblems) -> tuple[BoolArray, AnyArray]:
    """(labeled, y): which rows carry a label, and the labels as numpy (strings as str,
    numbers as numbers; placeholders where unlabeled). A NaN label is flagged as a problem."""
    labeled = labels.is_valid().to_numpy(zero_copy_only=False) if labels.null_count else \
        np.ones(len(labels), dtype=bool)
    if pa.types.is_null(labels.type):
        return labeled, np.zeros(len(labels))
    labels, invalid_rows = with_valid_utf8(labels)
    if invalid_rows is not None:
        problems.flag(invalid_rows, column, "invalid UTF-8")
    if is_string_type(labels.type) or pa.types.is_dictionary(labels.type):
        return labeled, np.asarray(pc.fill_null(labels.cast(pa.string()), "").to_numpy(zero_copy_only=False),
                                   dtype=str)
    if not is_numeric_type(labels.type):
        raise FeatureError(f"label column {column!r} has type {labels.type}; expected strings or numbers.")
    y = numpy_values(labels)
    if y.dtype.kind == "f":
        problems.flag(np.isnan(y), column, "NaN label")
        problems.flag(np.isinf(y), column, "infinite label")
        with np.errstate(invalid="ignore"):
            fractional = np.isfinite(y) & (y != np.round(y))
        problems.flag(fractional, column, "fractional label (a class is an integer or a string)")
    return labeled, y


def extract_labels(batch: pa.RecordBatch, column: str, problems: RowProblems) -> AnyArray:
    """The label column of a batch where every row needs a label: nulls are flagged."""
    labeled, y = label_values(batch.column(column), column, problems)
    problems.flag(~labeled, column, "null label")
    return y


def flag_classes_beyond(y: AnyArray, known: AnyArray | None, limit: int, column: str, problems: RowProblems,
                        message: str, labeled: BoolArray | None = None) -> None:
    """Flag the rows whose label would make the class set larger than ``limit``.

    y : shape (n_rows,); known : the classes learned so far (None: none yet); labeled : which
    rows carry a label (default: all). New labels are admitted in order of first appearance
    until the set holds ``limit`` classes; rows of the others get ``message``."""
    rows = ~problems.bad if labeled is None else labeled & ~problems.bad
    if not rows.any():
        return
    unique, first_seen = np.unique(y[rows], return_index=True)
    known_labels = set(known.tolist()) if known is not None else set()
    in_order = [label for _, label in sorted(zip(first_seen.tolist(), unique.tolist(), strict=True))]
    new = [label for label in in_order if label not in known_labels]
    room = max(limit - len(known_labels), 0)
    if len(new) > room:
        problems.flag(rows & np.isin(y, np.asarray(new[room:])), column, message)
