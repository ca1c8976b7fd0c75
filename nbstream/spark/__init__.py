"""Naive Bayes on Apache Spark (``pip install 'nbstream[spark]'``, Spark 4): learn, predict and
score a DataFrame where it lies, and get exactly the model of one pass over all its rows.

Every task learns its partition's Arrow batches (``mapInArrow``) and sends back its pipeline's
bytes; the driver merges them in partition order (``Pipeline.merge``). The statistics add up,
so the discrete models equal the single-process fit bit for bit and GaussianNB agrees to within
1e-9; classes are in order of first appearance in partition order. Nothing here needs a
``sparkContext``, so it runs on Spark Connect too.

nbstream ships itself to the executors (``shipping``): their Python needs only numpy and pyarrow
(and scipy for text or sparse vectors). An executor Python that cannot serve is reported in one
line (``ExecutorEnvironmentError``) naming the setting to change.

>>> pipeline = nbstream.spark.fit(df, label="label", features="pixels", model="bernoulli",
...                               binarize=127.5)                              # doctest: +SKIP
>>> nbstream.spark.predict(pipeline, test_df, proba=True, id="id").write.parquet("out")  # doctest: +SKIP
>>> nbstream.spark.evaluate(pipeline, test_df)["accuracy"]                     # doctest: +SKIP
0.8427

Forgetting (``half_life``) weighs rows by their order in one stream, which partitions do not
have: it is refused.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..arrow import FeatureError, FeatureSpec, Pipeline, PipelineLearner, files_source
from ..arrow.learning import DEFAULT_MAX_CLASSES
from ..arrow.predictions import label_type, proba_column
from ..metrics.classification import ConfusionCounts
from ..naive_bayes.kinds import model_class
from . import parquet_pieces, shipping, tasks
from .executors import ExecutorEnvironmentError, explained
from .frames import arrow_schema, feature_spec, input_files, spark_schema, with_places
from .places import local_path

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = ["ExecutorEnvironmentError", "RowRefused", "evaluate", "first_bad_row", "fit", "predict"]

RowRefused = tasks.RowRefused


def fit(df: DataFrame, *, label: str, features: str | Sequence[str] | FeatureSpec | None = None,  # noqa: PLR0913
        text: str | None = None, model: str = "multinomial", hash_bits: int = 20, ngrams: int = 1,
        max_classes: int = DEFAULT_MAX_CLASSES, skip_invalid: bool = False, rejects: str | None = None,
        locate_rows: bool = False, **params: Any) -> Pipeline:
    """Learn a pipeline from every row of ``df``.

    features : the feature columns: one column of arrays or Spark ML vectors (``VectorUDT``),
        numeric columns, or string/integer columns for ``model="categorical"``; or a FeatureSpec
    text : a string column instead (word n-grams hashed into 2**hash_bits features)
    model, params : the model kind and its parameters (alpha, binarize, fit_prior, ...)
    max_classes : the most classes the model may hold (more is an error, even with skip_invalid)
    skip_invalid : set bad rows aside instead of failing on the first one; with ``rejects``, they
        are written there as Parquet parts, with their _file, _row, _column and _error
    locate_rows : name bad rows by file and row (for DataFrames read from files: reads Spark's
        ``_metadata`` columns); otherwise by partition and row within it

    The pipeline's ``meta`` records the files read (``source``), ``rows_read`` and
    ``rows_rejected``. Raises RowRefused (one line) for the first bad row in partition order,
    FeatureError for a column that is missing or of a type that cannot be read, ValueError for
    invalid settings, ExecutorEnvironmentError for executors whose Python cannot run the tasks.
    """
    if params.get("half_life") is not None or params.get("window") is not None:
        raise ValueError("half_life and window follow the order of rows in one stream; a DataFrame's partitions "
                         "have none, so forgetting and windows cannot be learned on Spark.")
    if rejects is not None and not skip_invalid:
        raise ValueError("rejects are written only with skip_invalid.")
    estimator = model_class(model)(**params)
    estimator.check_params()
    spec = feature_spec(df, estimator.kind, features, text, hash_bits, ngrams)
    start = Pipeline(estimator, spec.encoder(), label=label)
    learner = PipelineLearner(start, max_classes=max_classes, skip_invalid=skip_invalid)
    data = _selected(df, learner.columns, learner.check_schema, locate_rows)
    reject_columns = tuple(learner.columns) if rejects is not None else ()
    output = _fit_output(data.select(*reject_columns).schema) if reject_columns else tasks.FIT_SUMMARY
    pieces = parquet_pieces.plan(df, learner.columns)  # None: Spark gives each task its rows
    task = tasks.FitTask(start.to_bytes(), max_classes, skip_invalid, output, reject_columns, tuple(pieces or ()))
    source = parquet_pieces.pieces_frame(df.sparkSession, pieces) if pieces else data
    learned = source.mapInArrow(task, spark_schema(output))
    if rejects is not None:
        learned = learned.persist()
    try:
        with explained():
            summaries = learned.where(learned[tasks.ROWS].isNotNull()) \
                .select(tasks.PARTITION, tasks.ROWS, tasks.SET_ASIDE, tasks.FAILURE, tasks.PIPELINE).collect()
            pipeline = _merged(start, sorted(summaries, key=lambda row: row[tasks.PARTITION]), max_classes)
            if rejects is not None and pipeline.meta["rows_rejected"]:
                learned.where(learned[tasks.ROWS].isNull()).select(*reject_columns, *tasks.REJECT_COLUMNS) \
                    .write.mode("overwrite").parquet(rejects)
    finally:
        if rejects is not None:
            learned.unpersist()
    files = [local_path(uri) for uri in input_files(df)]
    if files:
        pipeline.meta["source"] = files_source(files)
    return pipeline


def _fit_output(rejected: Any) -> Any:
    """FIT_SUMMARY, then the columns of a rejected row: its own (as Arrow types), then REJECTS."""
    import pyarrow as pa

    own = arrow_schema(rejected)
    return pa.schema([*tasks.FIT_SUMMARY, *(field.with_nullable(True) for field in own), *tasks.REJECTS])


def _merged(start: Pipeline, summaries: list[Any], max_classes: int) -> Pipeline:
    """The tasks' pipelines merged in partition order, or the first failure raised."""
    failures = [row[tasks.FAILURE] for row in summaries if row[tasks.FAILURE] is not None]
    if failures:
        raise RowRefused(tasks.describe_failure(json.loads(failures[0])))
    merged = Pipeline(start.model, start.features, label=start.label)
    for row in summaries:
        merged.merge(Pipeline.from_bytes(bytes(row[tasks.PIPELINE]), f"the pipeline of partition "
                                                                         f"{row[tasks.PARTITION]}"))
    if not merged.model.is_fitted:
        raise FeatureError("no valid labeled rows to learn from.")
    if len(merged.classes_) > max_classes:
        raise FeatureError(f"the partitions hold {len(merged.classes_)} classes together, more than "
                           f"--max-classes {max_classes}.")
    merged.meta.update(rows_read=sum(row[tasks.ROWS] for row in summaries),
                       rows_rejected=sum(row[tasks.SET_ASIDE] for row in summaries))
    return merged


def predict(pipeline: Pipeline, df: DataFrame, *, proba: bool = False, id: str | None = None,
            skip_invalid: bool = False, locate_rows: bool = False) -> DataFrame:
    """The predictions of every row of ``df``, lazily: the columns ``worker predict`` writes,
    [id], prediction, [proba_<class>...], [error] (with ``skip_invalid``: bad rows get nulls and
    their error). Without skip_invalid a bad row fails the Spark job with RowRefused. Run its
    actions ``with nbstream.spark.executors.explained():`` to have an executor Python that
    cannot serve reported in one line."""
    import pyarrow as pa

    columns = list(dict.fromkeys(pipeline.features.columns + ([id] if id else [])))
    data = _selected(df, columns, pipeline.features.check_schema, locate_rows)
    fields = [pa.field(id, arrow_schema(df.select(id).schema).field(0).type)] if id else []
    fields.append(pa.field("prediction", label_type(pipeline.classes_)))
    if proba:
        fields += [pa.field(proba_column(label), pa.float64()) for label in pipeline.classes_.tolist()]
    if skip_invalid:
        fields.append(pa.field("error", pa.string()))
    output = pa.schema(fields)
    return data.mapInArrow(tasks.PredictTask(pipeline.to_bytes(), output, id, proba, skip_invalid),
                           spark_schema(output))


def evaluate(pipeline: Pipeline, df: DataFrame, *, label: str | None = None, skip_invalid: bool = False,
             locate_rows: bool = False) -> dict[str, Any]:
    """What ``worker evaluate --json`` reports for ``df``: accuracy, macro-F1, log-loss, per-class
    precision/recall/F1, the confusion matrix (counts summed from the tasks) and rows_skipped.
    Without skip_invalid a bad row raises RowRefused.

    label : the label column (default: the one the pipeline learned from)."""
    label = label or pipeline.label
    if not label:
        raise ValueError("name the label column: the pipeline records none.")
    counts, skipped = _scored(pipeline, df, label, skip_invalid, locate_rows)
    report = counts.report()
    report["rows_skipped"] = skipped
    return report


def first_bad_row(pipeline: Pipeline, df: DataFrame, *, locate_rows: bool = False) -> str | None:
    """The first row (in partition order) that the pipeline cannot predict, described in one line, or None."""
    try:
        _scored(pipeline, df, None, False, locate_rows)
    except RowRefused as error:
        return str(error)
    return None


def _scored(pipeline: Pipeline, df: DataFrame, label: str | None, skip_invalid: bool,
            locate_rows: bool) -> tuple[ConfusionCounts, int]:
    columns = list(dict.fromkeys(pipeline.features.columns + ([label] if label else [])))

    def check(schema: Any, source: str) -> None:
        pipeline.features.check_schema(schema, source)
        if label and label not in schema.names:
            raise FeatureError(f"{source}: label column {label!r} not found; columns are {schema.names}.")

    data = _selected(df, columns, check, locate_rows)
    task = tasks.EvaluateTask(pipeline.to_bytes(), label, skip_invalid)
    with explained():
        summaries = sorted(data.mapInArrow(task, spark_schema(tasks.EVALUATE_SUMMARY)).collect(),
                           key=lambda row: row[tasks.PARTITION])
    failures = [row[tasks.FAILURE] for row in summaries if row[tasks.FAILURE] is not None]
    if failures:
        raise RowRefused(tasks.describe_failure(json.loads(failures[0])))
    counts = ConfusionCounts(pipeline.classes_)
    for row in summaries:
        counts.merge(ConfusionCounts.from_json(json.loads(row[tasks.COUNTS])))
    return counts, sum(row[tasks.SET_ASIDE] for row in summaries)


def _selected(df: DataFrame, columns: list[str], check: Any, locate_rows: bool) -> DataFrame:
    """The columns needed (checked here, on the driver, by ``check(arrow_schema, source)``), with
    each row's file and row when asked; nbstream shipped to the executors that will read them."""
    shipping.ship(df.sparkSession)
    missing = [name for name in columns if name not in df.columns]
    if missing:
        raise FeatureError(f"the DataFrame: column {missing[0]!r} not found; columns are {df.columns}.")
    selected = df.select(*columns)
    check(arrow_schema(selected.schema), "the DataFrame")
    return with_places(df, columns) if locate_rows else selected

