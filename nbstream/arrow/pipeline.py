"""A model together with the feature encoder that turns raw rows into its input: what ``worker
train`` writes, ``nbstream.spark.fit`` returns and every shard of a distributed fit sends back.

>>> pipeline = load_pipeline("spam.nbs")                       # doctest: +SKIP
>>> pipeline.predict({"text": ["WINNER! Claim your prize", "see you at 6"]})  # doctest: +SKIP
array(['spam', 'ham'], dtype='<U4')

A pipeline goes to bytes and back (``to_bytes``, ``from_bytes``: the snapshot format, so the
bytes of a fitted pipeline are a snapshot file's content) and merges with another one learned
from other rows (``merge``): the result is the pipeline one pass over all the rows gives.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from ..naive_bayes.base import NaiveBayes
from ..naive_bayes.categorical import CategoricalNB
from ..naive_bayes.explanations import Explanations
from ..naive_bayes.kinds import model_class
from ..persistence.snapshot import SnapshotError, dumps, load_with_header, loads, save
from ..utils.ndarrays import AnyArray, Features, FloatArray, IntArray
from .categorical import CategoricalEncoder
from .numeric import VectorEncoder
from .problems import FeatureError
from .spec import FeatureEncoder

# The bytes of a pipeline that learned nothing yet (a snapshot holds a fitted model only): this
# magic, then UTF-8 JSON of the model kind, its parameters and the snapshot metadata.
_UNFITTED_MAGIC = b"NBPIPE\x00\x01"


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


def files_source(files: list[str]) -> dict[str, Any]:
    """The snapshot metadata's ``source`` of a model that learned every row of these files (so
    that ``worker merge`` can tell when two models learned the same file)."""
    return {"type": "files", "files": list(files)}


@dataclass(frozen=True)
class PipelineExplanations:
    """What ``Pipeline.explanations`` gives: the arrays (``Explanations``: classes, predicted,
    runner_up, log_odds, prior, features, contributions) and each row as ``Pipeline.explain`` gives it."""

    arrays: Explanations
    rows: list[dict[str, Any]]


class Pipeline:
    """A model and the encoder that turns raw rows into its input.

    ``rows`` may be a pyarrow RecordBatch or Table, a pandas DataFrame, a dict of column
    name to values, or, when the encoder reads one column, a plain list of that column's
    values (texts, say). A row the encoder cannot use raises FeatureError naming it.

    label : the column the model learned its classes from (None: not recorded)
    meta : the rest of the snapshot metadata (where the rows came from, counters), kept as is
    """

    def __init__(self, model: NaiveBayes[Any, Any], features: FeatureEncoder, *, label: str | None = None,
                 meta: dict[str, Any] | None = None):
        self.model = model
        self.features = features
        self.label = label
        self.meta = dict(meta or {})

    @property
    def classes_(self) -> AnyArray:
        return self.model.classes_

    def transform(self, rows: object) -> Features:
        """Model input for the rows, shape (n_rows, n_features) (CSR for text)."""
        return self._encoded(rows)[1]

    def _encoded(self, rows: object) -> tuple[pa.RecordBatch, Features]:
        """The rows as a record batch, and the model input ``transform`` gives."""
        batch = self._batch(rows)
        self.features.check_schema(batch.schema, "rows")
        X, problems = self.features.encode(batch, learn=False, counts_only=self.model.requires_non_negative)
        if problems.any():
            row = int(problems.bad.argmax())
            raise FeatureError(f"row {row}, column {problems.column[row]!r}: {problems.message[row]} "
                               f"({int(problems.bad.sum())} of {batch.num_rows} rows unusable).")
        return batch, X

    def predict(self, rows: object) -> AnyArray:
        """The most probable class of each row, shape (n_rows,)."""
        return self.model.predict(self.transform(rows))

    def predict_proba(self, rows: object) -> FloatArray:
        """P(class | row), shape (n_rows, n_classes), columns in the order of ``classes_``."""
        return self.model.predict_proba(self.transform(rows))

    def explain(self, rows: object, top: int | None = 10) -> list[dict[str, Any]]:
        """Each row's prediction explained (``NaiveBayes.explain``) as JSON-ready values: {"class",
        "runner_up", "log_odds", "prior", "features": [{"feature", "contribution"}, ...]}, the
        features named by the encoder: a numeric column by its name, element i of a list column c
        as "c[i]", a categorical column c of value v as "c=v", a hashed text column by the row's
        words and n-grams that hash to it (colliding ones joined by "|"). ``explanations`` gives the
        arrays too."""
        return self.explanations(rows, top).rows

    def explanations(self, rows: object, top: int | None = 10) -> PipelineExplanations:
        """``explain``'s rows together with the arrays they come from."""
        return self.explanations_of(*self._encoded(rows), top)

    def explanations_of(self, batch: pa.RecordBatch, X: Features, top: int | None = 10) -> PipelineExplanations:
        """``explanations`` of rows already read: a record batch and the model input ``transform``
        gave for it, X (n_rows, n_features)."""
        explained = self.model.explain(X, top)
        names = self.features.feature_names(batch, explained.features)
        return PipelineExplanations(explained, explained.rows(row_names=names))

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

    # ---- merging -------------------------------------------------------------------------------
    def merge(self, other: Pipeline) -> Pipeline:
        """Add what ``other`` learned (from other rows) into this pipeline and return this one.

        Category codes, given by each pipeline in its own order of first appearance, are
        aligned: this pipeline's categories keep their codes and the other's new ones follow, in
        its order. A pipeline that learned nothing adds nothing but what its encoder learned.
        ``other`` is left as it was. Raises ValueError (nothing changed) when the models are of
        different kinds or parameters, or the features are laid out differently.
        """
        mine, theirs = self.model, other.model
        if theirs.kind != mine.kind:
            raise ValueError("the models are of different kinds.")
        differing = mine.differing_params(theirs)
        if differing:
            raise ValueError(f"the models' parameters differ: {differing}.")
        codes = _take_in_features(self.features, other.features)
        if codes is not None and isinstance(theirs, CategoricalNB) and theirs.is_fitted:
            theirs = CategoricalNB.from_state(theirs.export_state(tables=False)).recode_categories(codes)
        mine.merge(theirs)
        if self.label is None:
            self.label = other.label
        return self

    # ---- bytes and files -----------------------------------------------------------------------
    def snapshot_meta(self) -> dict[str, Any]:
        """The metadata a snapshot of this pipeline records: ``meta`` with the encoder and label."""
        data = {**self.meta, "features": self.features.to_json()}
        if self.label is not None:
            data["label"] = self.label
        return data

    def to_bytes(self) -> bytes:
        """The pipeline as bytes: a snapshot (``nbstream.persistence.snapshot.dumps``) once the model has
        learned; before, its kind, parameters and encoder."""
        if self.model.is_fitted:
            return dumps(self.model, self.snapshot_meta(), tables=False)  # loading recomputes them
        unfitted = {"kind": self.model.kind, "params": _plain(self.model.get_params()), "meta": self.snapshot_meta()}
        return _UNFITTED_MAGIC + json.dumps(unfitted, allow_nan=False).encode()

    @classmethod
    def from_bytes(cls, data: bytes, source: str = "pipeline") -> Pipeline:
        """The pipeline ``to_bytes`` gave. Raises SnapshotError (naming ``source``) for anything else."""
        if data.startswith(_UNFITTED_MAGIC):
            return cls._unfitted_from(data[len(_UNFITTED_MAGIC):], source)
        model, header = loads(data, source)
        return cls.from_snapshot_meta(model, header["meta"], source)

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the pipeline as a snapshot file (atomically) that ``load_pipeline`` and the worker
        commands read. The model must have learned (ValueError otherwise)."""
        if not self.model.is_fitted:
            raise ValueError("the pipeline learned nothing: there is no model to save.")
        return save(self.model, path, meta=self.snapshot_meta(), tables=False)

    @classmethod
    def from_snapshot_meta(cls, model: NaiveBayes[Any, Any], meta: dict[str, Any], source: object) -> Pipeline:
        """The pipeline of a model and the metadata its snapshot recorded (SnapshotError, naming
        ``source``, when that holds no usable encoder or label)."""
        label = meta.get("label")
        if label is not None and not isinstance(label, str):
            raise SnapshotError(f"{source}: the stored label column is not a string ({label!r}).")
        return cls(model, feature_encoder_of(meta, source), label=label,
                   meta={key: value for key, value in meta.items() if key not in ("features", "label")})

    @classmethod
    def _unfitted_from(cls, data: bytes, source: str) -> Pipeline:
        try:
            unfitted = json.loads(data)
            model = model_class(unfitted["kind"])(**unfitted["params"])
            model.check_params()
            meta = unfitted["meta"]
        except (ValueError, KeyError, TypeError, RecursionError) as error:
            raise SnapshotError(f"{source}: not a pipeline ({error}).") from None
        if not isinstance(meta, dict):
            raise SnapshotError(f"{source}: not a pipeline (its metadata is not an object).")
        return cls.from_snapshot_meta(model, meta, source)


def _plain(params: dict[str, object]) -> dict[str, object]:
    """Parameters as JSON values (an array of class priors as a list)."""
    return {name: value.tolist() if isinstance(value, np.ndarray) else value for name, value in params.items()}


def _take_in_features(mine: FeatureEncoder, theirs: FeatureEncoder) -> list[IntArray] | None:
    """Take what another encoder of the same layout learned into ``mine``; for categorical
    features, where each of the other's codes sits now (None: codes need no re-mapping)."""
    if isinstance(mine, VectorEncoder) and isinstance(theirs, VectorEncoder) and mine.spec == theirs.spec \
            and None in (mine.width, theirs.width):
        mine.width = theirs.width if mine.width is None else mine.width  # a shard that saw no usable list
        return None
    if not mine.same_layout(theirs):
        raise ValueError(f"the features differ ({theirs.describe()}; {mine.describe()}).")
    if isinstance(mine, CategoricalEncoder) and isinstance(theirs, CategoricalEncoder):
        return mine.align(theirs)
    return None


def load_pipeline(path: str | os.PathLike[str]) -> Pipeline:
    """The model, feature encoder and label column of a snapshot written by a worker command."""
    model, header = load_with_header(path)
    return Pipeline.from_snapshot_meta(model, header["meta"], path)
