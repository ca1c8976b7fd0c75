"""Learning a pipeline from Arrow record batches, by the rules every engine shares.

``worker train`` (Parquet files, one process), ``nbstream.spark.fit`` (one learner per Spark
task) and anything else that learns labeled rows go through ``PipelineLearner`` (or, for a model
per key, ``KeyedPipelineLearner``), so a row is learned, set aside or refused in the same way
everywhere:

- a row whose features the encoder cannot use, or whose label is missing, NaN, infinite or
  fractional, is a bad row;
- so is a row whose label would add a class beyond ``max_classes`` (new labels are admitted in
  order of first appearance);
- bad rows stop the learning (``UnusableRow``) unless ``skip_invalid``, when they are set
  aside: ``learn`` returns them, and the good rows of the batch are learned.
"""

from __future__ import annotations

import pyarrow as pa

from ..naive_bayes.keyed import KeyedNB
from ..stats.keyed_counts import Key
from ..utils.ndarrays import AnyArray, Features
from .keys import check_key_type, extract_keys
from .labels import extract_labels, flag_classes_beyond
from .pipeline import Pipeline
from .problems import FeatureError, RowProblems

DEFAULT_MAX_CLASSES = 1_000


class UnusableRow(FeatureError):
    """A bad row where bad rows are not to be skipped: ``row`` (in its batch), ``column``, ``reason``."""

    def __init__(self, row: int, column: str, reason: str):
        super().__init__(f"row {row}, column {column!r}: {reason}")
        self.row, self.column, self.reason = row, column, reason

    @classmethod
    def first_of(cls, problems: RowProblems) -> UnusableRow:
        return cls(*problems.first())


class PipelineLearner:
    """Learns ``pipeline`` (its model and encoder) from record batches holding its feature
    columns and its label column ``pipeline.label``.

    max_classes : the most classes the model may hold
    skip_invalid : set bad rows aside instead of raising UnusableRow
    """

    def __init__(self, pipeline: Pipeline, *, max_classes: int = DEFAULT_MAX_CLASSES, skip_invalid: bool = False):
        if pipeline.label is None:
            raise ValueError("the pipeline names no label column to learn from.")
        self.pipeline = pipeline
        self.label: str = pipeline.label
        self.max_classes = max_classes
        self.skip_invalid = skip_invalid

    @property
    def columns(self) -> list[str]:
        """The columns a batch must hold: the features', then the label."""
        return list(dict.fromkeys(self.pipeline.features.columns + [self.label]))

    def check_schema(self, schema: pa.Schema, source: str) -> None:
        """Raise FeatureError naming ``source`` when a column is missing or of a type that cannot be read."""
        self.pipeline.features.check_schema(schema, source)
        if self.label not in schema.names:
            raise FeatureError(f"{source}: label column {self.label!r} not found; columns are {schema.names}.")

    def learn(self, batch: pa.RecordBatch) -> RowProblems:
        """Learn the batch's good rows; returns the problems of its bad rows (set aside).

        Raises UnusableRow for the first bad row unless ``skip_invalid`` (nothing of the batch is
        learned then), and nbstream.LabelError when a label cannot join the model's classes (a
        string among numbers)."""
        model = self.pipeline.model
        X, problems = self.pipeline.features.encode(batch, learn=True, counts_only=model.requires_non_negative)
        y = extract_labels(batch, self.label, problems)
        keys = self._keys(batch, problems)
        flag_classes_beyond(y, model.classes_ if model.is_fitted else None, self.max_classes, self.label, problems,
                            f"label would add a class beyond --max-classes {self.max_classes}")
        if problems.any():
            if not self.skip_invalid:
                raise UnusableRow.first_of(problems)
            X, y = problems.select_good(X), problems.select_good(y)
            keys = None if keys is None else [key for key, good in zip(keys, problems.good.tolist(), strict=True)
                                              if good]
        if len(y):
            self._fit(X, y, keys)
        return problems

    def _keys(self, batch: pa.RecordBatch, problems: RowProblems) -> list[Key] | None:
        """Each row's key (a keyed learner's); None: the model keeps no model per key."""
        return None

    def _fit(self, X: Features, y: AnyArray, keys: list[Key] | None) -> None:
        self.pipeline.model.partial_fit(X, y)


class KeyedPipelineLearner(PipelineLearner):
    """Learns ``keyed`` (a model per key) from record batches that also hold the key column
    ``key``; the pipeline's model is the keyed model's group model once it has learned (before, a
    template of its family that tells the encoder what input it takes). A null or empty key is a
    bad row."""

    def __init__(self, pipeline: Pipeline, keyed: KeyedNB, key: str, *, max_classes: int = DEFAULT_MAX_CLASSES,
                 skip_invalid: bool = False):
        super().__init__(pipeline, max_classes=max_classes, skip_invalid=skip_invalid)
        self.keyed, self.key = keyed, key

    @property
    def columns(self) -> list[str]:
        return list(dict.fromkeys([*super().columns, self.key]))

    def check_schema(self, schema: pa.Schema, source: str) -> None:
        super().check_schema(schema, source)
        self.check_key_column(schema, source)

    def check_key_column(self, schema: pa.Schema, source: str) -> None:
        """FeatureError naming ``source`` unless the key column holds keys of the kind learned so far."""
        kind = check_key_type(schema, self.key, source)
        known = self.keyed.keys()[:1] if hasattr(self.keyed, "group_model_") else []
        if known and type(known[0]) is not kind:
            raise FeatureError(f"{source}: key column {self.key!r} holds {kind.__name__}s; the keys learned so far "
                               f"are {type(known[0]).__name__}s.")

    def _keys(self, batch: pa.RecordBatch, problems: RowProblems) -> list[Key]:
        return extract_keys(batch, self.key, problems)

    def _fit(self, X: Features, y: AnyArray, keys: list[Key] | None) -> None:
        assert keys is not None
        self.keyed.partial_fit(X, y, keys=keys)
        self.pipeline.model = self.keyed.group_model_
