"""The batch commands over Parquet: train, predict, evaluate, inspect, merge.

Each command builds a config from its options, delegates, and prints the outcome.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer

from nbstream.naive_bayes.discrete import FeatureCountsNB
from nbstream.persistence.snapshot import load_with_header

from .. import tracking
from ..batch.spark import EngineOptions
from ..config import FeatureOptions, ModelOptions, ScoreConfig, TrainConfig
from ..errors import ConfigError
from ..setting import names
from ..snapshot_meta import FilesRead, ParquetProgress, SnapshotMeta
from .app import app, reported_errors
from .flags import CommandFlags
from .options import SNAPSHOT, Given, model_parameters, setting_option, settings_part

TRACKING_FAILED = 3  # exit status: the command's work is done and kept, but its run was not logged to MLflow
SOURCES = typer.Argument(None, help="Parquet files, directories or globs (--engine spark: anything Spark reads, "
                                    "hdfs:// or s3a:// too).", show_default=False)

engine_options = settings_part("engine", EngineOptions)
"""Gives a command where it runs, received as one ``engine: Given`` that builds its ``EngineOptions``."""
run_log_options = settings_part("run_log", tracking.TrackingOptions)
"""Gives a command the MLflow options, received as one ``run_log: Given`` that builds its ``TrackingOptions``."""


@app.command()
@model_parameters
@engine_options
@run_log_options
def train(
    paths: list[str] | None = SOURCES,
    label: str = setting_option(TrainConfig, "label"),
    out: Path = setting_option(TrainConfig, "out"),
    model: str | None = setting_option(ModelOptions, "kind", None, "bernoulli, multinomial, complement, gaussian or "
                                                                   "categorical (default: multinomial)."),
    features: str | None = setting_option(FeatureOptions, "columns"),
    text: str | None = setting_option(FeatureOptions, "text"),
    hash_bits: int = setting_option(FeatureOptions, "hash_bits"),
    ngrams: int = setting_option(FeatureOptions, "ngrams"),
    max_classes: int = setting_option(TrainConfig, "max_classes"),
    checkpoint_every: int | None = setting_option(TrainConfig, "checkpoint_every"),
    resume: Path | None = setting_option(TrainConfig, "resume"),
    fresh: bool = setting_option(TrainConfig, "fresh"),
    rejects: Path | None = setting_option(TrainConfig, "rejects"),
    skip_invalid: bool = setting_option(TrainConfig, "skip_invalid"),
    batch_size: int = setting_option(TrainConfig, "batch_size"),
    model_key: str | None = setting_option(TrainConfig, "model_key"),
    key_prior_weight: float | None = setting_option(TrainConfig, "key_prior_weight"),
    progress: bool | None = setting_option(CommandFlags, "progress"),
    *,
    model_parameters: dict[str, Any],
    engine: Given,
    run_log: Given,
) -> None:
    """Learn a model from Parquet files in bounded memory and write a snapshot.

    Run again with the same arguments after an interruption to continue from the last checkpoint.
    With --engine spark, Spark learns every partition and the snapshot is their merge.
    Exit status 3: the snapshot is written, but --mlflow could not log the run.
    """
    from ..batch import spark
    from ..batch.train import train as run_train

    if resume is None and model is None:
        model = "multinomial"
    with reported_errors():
        logging_to: tracking.TrackingOptions = run_log.build()
        tracking_uri = logging_to.server()
        where: EngineOptions = engine.build()
        where.check_sources(paths or [])
        config = TrainConfig(
            paths=paths or [], label=label, out=out,
            model=ModelOptions(kind=model, **model_parameters),
            features=FeatureOptions(columns=names(features), text=text, hash_bits=hash_bits, ngrams=ngrams),
            batch_size=batch_size, checkpoint_every=checkpoint_every, resume=resume, fresh=fresh,
            skip_invalid=skip_invalid, rejects=rejects, max_classes=max_classes, model_key=model_key,
            key_prior_weight=key_prior_weight)
        summary = spark.train(config, where) if where.spark else run_train(config, progress=progress)
        logged = _log_run(lambda: tracking.log_training(tracking_uri, config, summary, logging_to.register,
                                                        logging_to.timeout)) if tracking_uri else None
    rate = summary.rows_read / summary.seconds if summary.seconds > 0 else 0.0
    if summary.resumed_from:
        typer.echo(f"continued from file {summary.resumed_from.file_index}, row {summary.resumed_from.row}")
    typer.echo(f"learned {summary.rows_learned:,} rows ({summary.rows_rejected:,} rejected in all) in "
               f"{summary.seconds:.1f}s, {rate:,.0f} rows/s")
    typer.echo(f"classes: {', '.join(str(c) for c in summary.model.classes_.tolist())}")
    if summary.keys is not None:
        typer.echo(f"keys: {summary.keys:,}")
    typer.echo(f"snapshot: {summary.snapshot}")
    if summary.rows_rejected:
        typer.echo(f"rejected rows: {config.rejects_dir}")
    _report_run(logged)


def _log_run(log: Callable[[], tracking.LoggedRun]) -> tracking.LoggedRun | tracking.TrackingFailed:
    """The run ``log`` logged, or why it was not: said once the command's own results are printed."""
    try:
        return log()
    except tracking.TrackingFailed as failure:
        return failure


def _report_run(logged: tracking.LoggedRun | tracking.TrackingFailed | None, *, lines: bool = True) -> None:
    """Where the run went (with ``lines``); or the one line saying why it was not logged, and exit status 3."""
    if isinstance(logged, tracking.TrackingFailed):
        typer.echo(f"error: {logged}", err=True)
        raise typer.Exit(code=TRACKING_FAILED)
    for line in logged.describe() if logged and lines else []:
        typer.echo(line)


@app.command()
@engine_options
def predict(
    snapshot: Path = SNAPSHOT,
    paths: list[str] | None = SOURCES,
    out: Path = setting_option(TrainConfig, "out", help="Parquet file to write (--engine spark: a folder of Parquet "
                                                        "parts)."),
    proba: bool = setting_option(CommandFlags, "proba"),
    id_column: str | None = setting_option(CommandFlags, "id_column"),
    skip_invalid: bool = setting_option(ScoreConfig, "skip_invalid"),
    batch_size: int = setting_option(ScoreConfig, "batch_size"),
    progress: bool | None = setting_option(CommandFlags, "progress"),
    *,
    engine: Given,
) -> None:
    """Predict a label for every row; one output row per input row."""
    from ..batch import spark
    from ..batch.score import predict as run_predict

    with reported_errors():
        config = ScoreConfig(snapshot=snapshot, paths=paths or [], batch_size=batch_size, skip_invalid=skip_invalid)
        where: EngineOptions = engine.build()
        where.check_sources(config.paths)
        rows = spark.predict(config, out, proba, id_column, where) if where.spark else \
            run_predict(config, out, proba, id_column, progress=progress)
    typer.echo(f"wrote {rows:,} predictions to {out}")


@app.command()
@engine_options
@run_log_options
def evaluate(
    snapshot: Path = SNAPSHOT,
    paths: list[str] | None = SOURCES,
    label: str | None = setting_option(TrainConfig, "label", None, "Label column (default: the one the model was "
                                                                   "trained on)."),
    as_json: bool = setting_option(CommandFlags, "as_json"),
    prequential: bool = setting_option(CommandFlags, "prequential"),
    skip_invalid: bool = setting_option(ScoreConfig, "skip_invalid"),
    batch_size: int = setting_option(ScoreConfig, "batch_size"),
    progress: bool | None = setting_option(CommandFlags, "progress"),
    *,
    engine: Given,
    run_log: Given,
) -> None:
    """Accuracy, macro-F1, log-loss, Brier score, per-class precision/recall and the confusion matrix.

    Exit status 3: the metrics are printed, but --mlflow could not log the run.
    """
    from ..batch import spark
    from ..batch.score import evaluate as run_evaluate

    with reported_errors():
        config = ScoreConfig(snapshot=snapshot, paths=paths or [], batch_size=batch_size, skip_invalid=skip_invalid)
        logging_to: tracking.TrackingOptions = run_log.build()
        tracking_uri = logging_to.server()
        where: EngineOptions = engine.build()
        where.check_sources(config.paths)
        if prequential and where.spark:
            raise ConfigError("--prequential replays the rows in order on one machine: use --engine local.")
        report = spark.evaluate(config, label, where) if where.spark else \
            run_evaluate(config, label, progress=progress, prequential=prequential)
        logged = _log_run(lambda: tracking.log_evaluation(tracking_uri, config, label, report, logging_to.register,
                                                          logging_to.timeout)) if tracking_uri else None
    if as_json:
        run = logged.to_json() if isinstance(logged, tracking.LoggedRun) else None
        typer.echo(json.dumps({**report, "mlflow": run} if run else report, indent=2))
    else:
        _print_report(report)
    _report_run(logged, lines=not as_json)


def _print_report(report: dict[str, Any]) -> None:
    """The metrics, per-class scores and confusion matrix, as a table."""
    typer.echo(f"rows:      {report['rows']:,}" + (f" ({report['rows_skipped']:,} skipped)"
                                                   if report["rows_skipped"] else ""))
    typer.echo(f"accuracy:  {report['accuracy']:.4f}")
    typer.echo(f"macro-F1:  {report['macro_f1']:.4f}")
    typer.echo(f"log-loss:  {report['log_loss']:.4f}")
    typer.echo(f"brier:     {report['brier']:.4f}")
    typer.echo(f"{'class':<16}{'precision':>10}{'recall':>10}{'f1':>10}{'support':>10}")
    for row in report["classes"]:
        typer.echo(f"{row['label']!s:<16}{row['precision']:>10.4f}{row['recall']:>10.4f}"
                   f"{row['f1']:>10.4f}{row['support']:>10,}")
    typer.echo("confusion matrix (rows: true, columns: predicted):")
    width = max(6, *(len(str(label)) + 1 for label in report["labels"]))
    typer.echo(" " * width + "".join(f"{label!s:>{width}}" for label in report["predicted_labels"]))
    for label, counts in zip(report["labels"], report["confusion_matrix"], strict=True):
        typer.echo(f"{label!s:>{width}}" + "".join(f"{c:>{width}}" for c in counts))


@app.command()
def inspect(snapshot: Path = typer.Argument(..., help="Snapshot file.", show_default=False),
            as_json: bool = setting_option(CommandFlags, "as_json", help="Print the header as JSON.")) -> None:
    """Kind, parameters, classes and counts, examples seen, features, source position, checksum."""
    with reported_errors():
        model, header = load_with_header(snapshot)
        meta = SnapshotMeta.from_json(header["meta"], snapshot) if "features" in header["meta"] else None
    if as_json:
        typer.echo(json.dumps({key: value for key, value in header.items() if key != "arrays"}, indent=2))
        return
    typer.echo(f"kind:           {header['kind']}")
    typer.echo(f"format version: {header['format_version']} (checksum ok)")
    typer.echo(f"created:        {header['created_at']}")
    typer.echo(f"examples seen:  {header['examples_seen']:,}")
    typer.echo(f"parameters:     {model!r}")
    if isinstance(model, FeatureCountsNB) and model.sparse_counts_:
        typer.echo(f"counts:         sparse, {model.feature_count_.nnz:,} (class, feature) pairs seen")
    if meta is None:
        typer.echo(f"features:       {header['n_features']}")
        extra = header["meta"]
    else:
        typer.echo(f"features:       {meta.features.describe()}")
        typer.echo(f"label column:   {meta.label}")
        if meta.source is not None:
            typer.echo(f"source:         {meta.source.describe()}")
        if isinstance(meta.source, (ParquetProgress, FilesRead)):
            typer.echo(f"rows rejected:  {meta.rows_rejected:,}")
        if meta.models is not None:
            typer.echo(f"models:         {meta.models.describe()}")
        extra = meta.extra
    typer.echo(f"classes ({'open' if header['open_classes'] else 'fixed'}):")
    for label, count in zip(model.classes_.tolist(), model.class_count_.tolist(), strict=True):
        typer.echo(f"  {label!s:<20} {count:,.6g}")
    if extra:
        typer.echo(f"metadata:       {json.dumps(extra)}")


@app.command()
def merge(snapshots: list[Path] = typer.Argument(..., help="Snapshots trained on different shards.",
                                                 show_default=False),
          out: Path = setting_option(TrainConfig, "out", help="Merged snapshot to write.")) -> None:
    """Merge snapshots of the same kind and features into one model (exactly as if trained on all)."""
    from ..batch.merge import merge_snapshots

    with reported_errors():
        model, overlaps = merge_snapshots(snapshots, out)
    for overlap in overlaps:
        typer.echo(f"warning: {overlap}", err=True)
    typer.echo(f"merged {len(snapshots)} snapshots: {model.n_examples_seen_:,} examples, "
               f"{len(model.classes_)} classes -> {out}")
