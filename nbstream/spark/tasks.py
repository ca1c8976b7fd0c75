"""What runs inside Spark's tasks (``DataFrame.mapInArrow``): each task learns, predicts or scores
the Arrow batches of its partition and yields Arrow batches back.

A task never raises for a bad row it was asked to stop at: it yields the row's place and what
is wrong with it (a ``failure``, JSON) and stops, so that the driver reports the first bad row
in partition order as one line, with no retries of a task whose data will not change. Only
``PredictTask`` raises (``RowRefused``), as it has nothing but predictions to yield.

Each task is a small frozen dataclass that Spark ships to the executors; the pipeline travels as
its bytes (``Pipeline.to_bytes``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from ..arrow import FeatureError, Pipeline, PipelineLearner, RowProblems, UnusableRow, extract_labels
from ..arrow.predictions import prediction_table
from ..metrics.classification import ConfusionCounts
from ..utils.class_set import LabelError
from .parquet_pieces import Piece, PieceUnreadable
from .places import FILE, ROW, local_path

PARTITION, PIPELINE, COUNTS = "__nbstream_partition", "__nbstream_pipeline", "__nbstream_counts"
ROWS, SET_ASIDE, FAILURE = "__nbstream_rows", "__nbstream_set_aside", "__nbstream_failure"
REJECT_COLUMNS = ("_file", "_row", "_column", "_error")  # beside a rejected row's own columns

SUMMARY = pa.schema([(PARTITION, pa.int32()), (ROWS, pa.int64()), (SET_ASIDE, pa.int64()), (FAILURE, pa.string())])
FIT_SUMMARY = pa.schema([*SUMMARY, (PIPELINE, pa.binary())])
EVALUATE_SUMMARY = pa.schema([*SUMMARY, (COUNTS, pa.string())])
REJECTS = pa.schema([(name, kind) for name, kind in zip(REJECT_COLUMNS, (pa.string(), pa.int64(), pa.string(),
                                                                        pa.string()), strict=True)])


class RowRefused(FeatureError):
    """A bad row met without skip_invalid: its message is the row's place and what is wrong with it."""


def describe_failure(failure: dict[str, Any]) -> str:
    """The one line naming a bad row (or rows) and what is wrong: the local engine's words (or,
    for a file that could not be read, the ``message`` saying so)."""
    if "message" in failure:
        return str(failure["message"])
    where = local_path(failure["file"]) if failure.get("file") else f"partition {failure['partition']}"
    rows = f"row {failure['row']}" if failure.get("last_row") is None \
        else f"rows {failure['row']} to {failure['last_row']}"
    return f"{where}: {rows}, column {failure['column']!r}: {failure['reason']}"


def _partition() -> int:
    from pyspark import TaskContext

    context = TaskContext.get()
    return context.partitionId() if context is not None else 0


class _Places:
    """Where each row of a batch came from: its file and row there when known, else its row in
    the partition.

    files : each row's file URI (None: not known); rows : (n,) each row's row number
    """

    def __init__(self, partition: int, rows: np.ndarray, files: pa.Array | None = None):
        self.partition, self.rows, self.files = partition, rows, files

    @classmethod
    def of(cls, batch: pa.RecordBatch, partition: int, rows_before: int) -> _Places:
        """A batch Spark gave: its rows' files and rows when it carries them (FILE, ROW)."""
        names = batch.schema.names
        rows = batch.column(ROW).to_numpy() if ROW in names else \
            np.arange(rows_before, rows_before + batch.num_rows, dtype=np.int64)
        return cls(partition, rows, batch.column(FILE) if FILE in names else None)

    @classmethod
    def in_file(cls, batch: pa.RecordBatch, partition: int, uri: str, first_row: int) -> _Places:
        """A batch read from one file, its first row being the file's row ``first_row``."""
        files = pa.DictionaryArray.from_arrays(pa.array(np.zeros(batch.num_rows, dtype=np.int32)), pa.array([uri]))
        return cls(partition, np.arange(first_row, first_row + batch.num_rows, dtype=np.int64), files)

    def failure(self, row: int, column: str, reason: str, last_row: int | None = None) -> str:
        return json.dumps({"partition": self.partition, "file": self._file(row), "row": int(self.rows[row]),
                           "last_row": None if last_row is None else int(self.rows[last_row]),
                           "column": column, "reason": reason})

    def _file(self, row: int) -> str | None:
        return None if self.files is None else str(self.files[row].as_py())

    def rejects(self, batch: pa.RecordBatch, problems: RowProblems, columns: list[str]) -> pa.Table:
        """The bad rows with their own ``columns``, file, row, column and error."""
        bad = np.flatnonzero(problems.bad)
        table = pa.Table.from_batches([batch.select(columns)]).take(pa.array(bad))
        files = [local_path(file) for file in self.files.take(pa.array(bad)).to_pylist()] \
            if self.files is not None else [None] * len(bad)
        for name, values, kind in zip(REJECT_COLUMNS, (files, self.rows[bad], problems.column[bad].tolist(),
                                                       problems.message[bad].tolist()), REJECTS.types, strict=True):
            table = table.append_column(name, pa.array(values, kind))
        return table


def _summary(schema: pa.Schema, partition: int, rows: int, set_aside: int, failure: str | None = None,
             payload: dict[str, object] | None = None) -> pa.RecordBatch:
    """The one row a task ends with; columns of ``schema`` not given are null."""
    values = {PARTITION: partition, ROWS: rows, SET_ASIDE: set_aside, FAILURE: failure, **(payload or {})}
    return pa.RecordBatch.from_pylist([{name: values.get(name) for name in schema.names}], schema=schema)


def _padded(table: pa.Table, schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    """The table's batches in ``schema``: its columns where it has them, nulls elsewhere."""
    columns = [table.column(field.name).cast(field.type) if field.name in table.column_names
               else pa.nulls(table.num_rows, field.type) for field in schema]
    yield from pa.Table.from_arrays(columns, schema=schema).to_batches()


@dataclass(frozen=True)
class FitTask:
    """Learns a partition: yields the rows it set aside (with skip_invalid, when ``reject_columns``
    are given), then one summary row with the pipeline it learned (or the first bad row's
    failure, and no pipeline).

    pipeline : the bytes of the pipeline every task starts from (nothing learned)
    schema : the output: FIT_SUMMARY, then (to keep rejects) ``reject_columns`` and REJECTS
    pieces : when given, the task reads the ``parquet_pieces.Piece`` of each id it receives
        (``pieces_frame``: one a partition) instead of learning the batches Spark gives it
    """
    pipeline: bytes
    max_classes: int
    skip_invalid: bool
    schema: pa.Schema
    reject_columns: tuple[str, ...] = ()
    pieces: tuple[Piece, ...] = ()

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        if not self.pieces:
            partition = _partition()
            yield from self._learned(partition, _located(batches, partition))
            return
        for numbers in batches:  # the ids of pieces_frame: this partition's piece
            for number in numbers.column(0).to_pylist():
                try:
                    yield from self._learned(number, ((batch, _Places.in_file(batch, number, uri, row))
                                                      for batch, uri, row in self.pieces[number].batches()))
                except PieceUnreadable as error:
                    yield _summary(self.schema, number, 0, 0, json.dumps({"partition": number, "message": str(error)}))

    def _learned(self, partition: int, located: Iterator[tuple[pa.RecordBatch, _Places]]) -> Iterator[pa.RecordBatch]:
        pipeline = Pipeline.from_bytes(self.pipeline)
        learner = PipelineLearner(pipeline, max_classes=self.max_classes, skip_invalid=self.skip_invalid)
        rows = set_aside = 0
        for batch, places in located:
            try:
                problems = learner.learn(batch)
            except UnusableRow as error:
                yield _summary(self.schema, partition, rows, set_aside, places.failure(error.row, error.column,
                                                                                       error.reason))
                return
            except LabelError as error:
                yield _summary(self.schema, partition, rows, set_aside,
                               places.failure(0, learner.label, str(error), last_row=batch.num_rows - 1))
                return
            if problems.any():
                set_aside += int(problems.bad.sum())
                if self.reject_columns:
                    yield from _padded(places.rejects(batch, problems, list(self.reject_columns)), self.schema)
            rows += batch.num_rows
        yield _summary(self.schema, partition, rows, set_aside, payload={PIPELINE: pipeline.to_bytes()})


def _located(batches: Iterator[pa.RecordBatch], partition: int) -> Iterator[tuple[pa.RecordBatch, _Places]]:
    """Each batch Spark gave a partition, with its rows' places."""
    rows = 0
    for batch in batches:
        yield batch, _Places.of(batch, partition, rows)
        rows += batch.num_rows


@dataclass(frozen=True)
class EvaluateTask:
    """Scores a partition against its labels: one summary row with its confusion counts (JSON),
    or the first bad row's failure. Without a label it only looks for bad rows (a check before
    predicting)."""
    pipeline: bytes
    label: str | None
    skip_invalid: bool

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        partition = _partition()
        pipeline = Pipeline.from_bytes(self.pipeline)
        counts = ConfusionCounts(pipeline.classes_)
        rows = skipped = 0
        for batch in batches:
            X, problems = pipeline.features.encode(batch, learn=False)
            y = extract_labels(batch, self.label, problems) if self.label else None
            if problems.any() and not self.skip_invalid:
                row, column, reason = problems.first()
                yield _summary(EVALUATE_SUMMARY, partition, rows, skipped,
                               _Places.of(batch, partition, rows).failure(row, column, reason))
                return
            if y is not None:
                good = problems.select_good(X)
                proba = pipeline.model.predict_proba(good) if good.shape[0] else np.zeros((0, len(counts.labels)))
                counts.add(problems.select_good(y), proba)
            skipped += int(problems.bad.sum())
            rows += batch.num_rows
        yield _summary(EVALUATE_SUMMARY, partition, rows, skipped, payload={COUNTS: json.dumps(counts.to_json())})


@dataclass(frozen=True)
class PredictTask:
    """Predicts a partition: one output row per input row (see ``prediction_table``)."""
    pipeline: bytes
    schema: pa.Schema
    id_column: str | None
    with_proba: bool
    skip_invalid: bool

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        partition = _partition()
        pipeline = Pipeline.from_bytes(self.pipeline)
        classes, rows = pipeline.classes_, 0
        for batch in batches:
            X, problems = pipeline.features.encode(batch, learn=False)
            if problems.any() and not self.skip_invalid:
                raise RowRefused(describe_failure(json.loads(_Places.of(batch, partition, rows).failure(
                    *problems.first()))))
            good = problems.select_good(X)
            proba = pipeline.model.predict_proba(good) if good.shape[0] else np.zeros((0, len(classes)))
            table = prediction_table(classes, proba, problems, id_column=self.id_column,
                                     ids=batch.column(self.id_column) if self.id_column else None,
                                     with_proba=self.with_proba, with_errors=self.skip_invalid)
            yield from table.cast(self.schema).to_batches()
            rows += batch.num_rows
