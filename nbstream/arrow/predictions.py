"""The rows of predictions ``worker predict`` writes and ``nbstream.spark.predict`` returns: one
per input row, with its id, the predicted class, optionally each class's probability, and (when
bad rows are kept) what was wrong with the row."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from ..utils.ndarrays import AnyArray, BoolArray, FloatArray
from .problems import RowProblems


def label_type(classes: AnyArray) -> pa.DataType:
    """The Arrow type of a prediction column for these classes: strings or the classes' numbers."""
    return pa.string() if classes.dtype.kind in "US" else pa.from_numpy_dtype(classes.dtype)


def proba_column(label: object) -> str:
    """The name of the column holding the probability of class ``label``."""
    return f"proba_{label}"


def prediction_table(classes: AnyArray, proba: FloatArray, problems: RowProblems, *, ids: pa.Array | None = None,
                     id_column: str | None = None, with_proba: bool = False, with_errors: bool = False) -> pa.Table:
    """One row per input row: [id_column], prediction, [proba_<class>...], [error].

    classes : shape (n_classes,); proba : shape (n_good_rows, n_classes), the good rows' probabilities;
    problems : the batch's rows, the bad ones with no prediction (nulls) and their error."""
    good = problems.good
    columns: dict[str, pa.Array] = {}
    if id_column is not None and ids is not None:
        columns[id_column] = ids
    predicted = classes[np.argmax(proba, axis=1)] if len(proba) else classes[:0]
    columns["prediction"] = _spread(predicted, good, label_type(classes))
    if with_proba:
        for i, label in enumerate(classes.tolist()):
            columns[proba_column(label)] = _spread(proba[:, i], good, pa.float64())
    if with_errors:
        columns["error"] = pa.array([None if ok else f"{column}: {message}" for ok, column, message in
                                     zip(good, problems.column, problems.message, strict=True)], pa.string())
    return pa.table(columns)


def _spread(values: AnyArray, good: BoolArray, arrow_type: pa.DataType) -> pa.Array:
    """Values for the good rows, nulls for the others."""
    if good.all():
        return pa.array(values, arrow_type)
    full = np.zeros(len(good), dtype=values.dtype if values.dtype.kind != "U" else object)
    full[good] = values
    return pa.array(full, arrow_type, mask=~good)
