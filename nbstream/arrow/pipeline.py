"""A snapshot written by ``worker train`` (or ``serve``), used from Python: its model together
with the feature encoder it recorded, applied to raw rows.

>>> pipeline = load_pipeline("spam.nbs")                       # doctest: +SKIP
>>> pipeline.predict({"text": ["WINNER! Claim your prize", "see you at 6"]})  # doctest: +SKIP
array(['spam', 'ham'], dtype='<U4')
"""

from __future__ import annotations

import os
from typing import Any

import pyarrow as pa

from ..base import NaiveBayes
from ..ndarrays import AnyArray, Features, FloatArray
from ..snapshot import SnapshotError, load_with_header
from .problems import FeatureError
from .spec import FeatureEncoder


def feature_encoder_of(meta: object, source: object) -> FeatureEncoder:
    """The feature encoder a worker snapshot's metadata records (spec and what it learned).

    Raises SnapshotError when there is none (a model saved with ``nbstream.save``) or it is
    inconsistent."""
    if not isinstance(meta, dict) or "features" not in meta:
        raise SnapshotError(f"{source} has no feature spec; it was not written by worker train or serve.")
    try:
        return FeatureEncoder.from_json(meta["features"])
    except FeatureError as error:
        raise SnapshotError(f"{source}: {error}") from None
    except (KeyError, TypeError, ValueError, AttributeError) as error:
        raise SnapshotError(f"{source}: the stored feature spec is inconsistent ({error!r}).") from None


class Pipeline:
    """A model and the encoder that turns raw rows into its input.

    ``rows`` may be a pyarrow RecordBatch or Table, a pandas DataFrame, a dict of column
    name to values, or, when the encoder reads one column, a plain list of that column's
    values (texts, say). A row the encoder cannot use raises FeatureError naming it.
    """

    def __init__(self, model: NaiveBayes[Any, Any], features: FeatureEncoder):
        self.model = model
        self.features = features

    @property
    def classes_(self) -> AnyArray:
        return self.model.classes_

    def transform(self, rows: object) -> Features:
        """Model input for the rows, shape (n_rows, n_features) (CSR for text)."""
        batch = self._batch(rows)
        self.features.check_schema(batch.schema, "rows")
        X, problems = self.features.encode(batch, learn=False, counts_only=self.model.requires_non_negative)
        if problems.any():
            row = int(problems.bad.argmax())
            raise FeatureError(f"row {row}, column {problems.column[row]!r}: {problems.message[row]} "
                               f"({int(problems.bad.sum())} of {batch.num_rows} rows unusable).")
        return X

    def predict(self, rows: object) -> AnyArray:
        """The most probable class of each row, shape (n_rows,)."""
        return self.model.predict(self.transform(rows))

    def predict_proba(self, rows: object) -> FloatArray:
        """P(class | row), shape (n_rows, n_classes), columns in the order of ``classes_``."""
        return self.model.predict_proba(self.transform(rows))

    def _batch(self, rows: object) -> pa.RecordBatch:
        if isinstance(rows, pa.RecordBatch):
            return rows
        if isinstance(rows, pa.Table):
            return rows.combine_chunks().to_batches()[0] if rows.num_rows else \
                pa.RecordBatch.from_pylist([], schema=rows.schema)
        if isinstance(rows, dict):
            return pa.RecordBatch.from_pydict(rows)
        if hasattr(rows, "columns") and hasattr(rows, "iloc"):  # a pandas DataFrame
            return pa.RecordBatch.from_pandas(rows, preserve_index=False)
        if isinstance(rows, (list, tuple)) and len(self.features.columns) == 1:
            return pa.RecordBatch.from_pydict({self.features.columns[0]: list(rows)})
        raise TypeError(f"rows must be a RecordBatch, Table, DataFrame or dict of columns "
                        f"{self.features.columns}; got {type(rows).__name__}.")


def load_pipeline(path: str | os.PathLike[str]) -> Pipeline:
    """The model and feature encoder of a snapshot written by a worker command."""
    model, header = load_with_header(path)
    return Pipeline(model, feature_encoder_of(header["meta"], path))
