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
from ..snapshot_meta import FilesRead, ParquetProgress, SnapshotMeta
from .app import app, reported_errors
from .options import (
    BATCH_SIZE,
    MLFLOW,
    MLFLOW_TIMEOUT,
    PROGRESS,
    REGISTER,
    SKIP_INVALID,
    SNAPSHOT,
    columns,
    env,
    model_parameters,
    option_group,
    setting_option,
)

TRACKING_FAILED = 3  # exit status: the command's work is done and kept, but its run was not logged to MLflow
SOURCES = typer.Argument(None, help="Parquet files, directories or globs (--engine spark: anything Spark reads, "
                                    "hdfs:// or s3a:// too).", show_default=False)
ENGINE = typer.Option("local", "--engine", envvar=env("ENGINE"),
                      help="local (this process) or spark (Apache Spark: pip install 'nbstream\\[spark]').")
MASTER = typer.Option(None, "--master", envvar=env("MASTER"),
                      help="--engine spark: the master URL (local[4], spark://HOST:7077, yarn, sc://HOST for Spark "
                           "Connect; default: spark-submit's, else local[*]).")
SPARK_CONF = typer.Option(None, "--spark-conf", envvar=env("SPARK_CONF"),
                          help="--engine spark: a Spark setting KEY=VALUE; repeat the option for more.")
TABLE = typer.Option(None, "--table", envvar=env("TABLE"),
                     help="--engine spark: read this catalog table (Hive, Delta, Iceberg) instead of PATHs.")


def _engine(engine: str, master: str | None, spark_conf: list[str] | None, table: str | None) -> EngineOptions:
    return EngineOptions(engine, master, list(spark_conf or []), table)


engine_options = option_group("engine", _engine, {
    "engine": (str, ENGINE), "master": (str | None, MASTER), "spark_conf": (list[str] | None, SPARK_CONF),
    "table": (str | None, TABLE)})
"""Gives a command where it runs, received as one ``engine: EngineOptions``."""


@app.command()
@model_parameters
@engine_options
def train(
    paths: list[str] | None = SOURCES,
    label: str = typer.Option(..., "--label", envvar=env("LABEL"), help="Column holding the class label."),
    out: Path = typer.Option(..., "--out", envvar=env("OUT"), help="Snapshot to write (and to continue from)."),
    model: str | None = typer.Option(None, "--model", envvar=env("MODEL"),
                                        help="bernoulli, multinomial, complement, gaussian or categorical "
                                             "(default: multinomial)."),
    features: str | None = typer.Option(None, "--features", envvar=env("FEATURES"),
                                           help="Feature columns, comma-separated: one list column "
                                                "(e.g. pixels), numeric columns, or string columns for "
                                                "--model categorical."),
    text: str | None = typer.Option(None, "--text", envvar=env("TEXT"),
                                       help="A text column: lowercased word tokens, hashed."),
    hash_bits: int = setting_option(FeatureOptions, "hash_bits"),
    ngrams: int = setting_option(FeatureOptions, "ngrams"),
    max_classes: int = setting_option(TrainConfig, "max_classes"),
    checkpoint_every: int | None = typer.Option(None, "--checkpoint-every", min=1,
                                                   envvar=env("CHECKPOINT_EVERY"),
                                                   help="Write the snapshot every N rows (the run can then "
                                                        "be restarted where it stopped)."),
    resume: Path | None = typer.Option(None, "--resume", envvar=env("RESUME"),
                                          help="Keep training this snapshot's model on new data."),
    fresh: bool = typer.Option(False, "--fresh", envvar=env("FRESH"),
                               help="Start over even if --out holds a checkpoint of this run."),
    rejects: Path | None = typer.Option(None, "--rejects", envvar=env("REJECTS"),
                                           help="Folder for rows set aside by --skip-invalid "
                                                "(default: OUT.rejects)."),
    skip_invalid: bool = SKIP_INVALID,
    batch_size: int = BATCH_SIZE,
    progress: bool | None = PROGRESS,
    mlflow: bool = MLFLOW,
    mlflow_timeout: float = MLFLOW_TIMEOUT,
    register: str | None = REGISTER,
    *,
    model_parameters: dict[str, Any],
    engine: EngineOptions,
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
        tracking_uri = _tracking_server(mlflow, register, mlflow_timeout)
        engine.check_sources(paths or [])
        config = TrainConfig(
            paths=paths or [], label=label, out=out,
            model=ModelOptions(kind=model, **model_parameters),
            features=FeatureOptions(columns=columns(features), text=text, hash_bits=hash_bits, ngrams=ngrams),
            batch_size=batch_size, checkpoint_every=checkpoint_every, resume=resume, fresh=fresh,
            skip_invalid=skip_invalid, rejects=rejects, max_classes=max_classes)
        summary = spark.train(config, engine) if engine.spark else run_train(config, progress=progress)
        logged = _log_run(lambda: tracking.log_training(tracking_uri, config, summary, register, mlflow_timeout)) \
            if tracking_uri else None
    rate = summary.rows_read / summary.seconds if summary.seconds > 0 else 0.0
    if summary.resumed_from:
        typer.echo(f"continued from file {summary.resumed_from.file_index}, row {summary.resumed_from.row}")
    typer.echo(f"learned {summary.rows_learned:,} rows ({summary.rows_rejected:,} rejected in all) in "
               f"{summary.seconds:.1f}s, {rate:,.0f} rows/s")
    typer.echo(f"classes: {', '.join(str(c) for c in summary.model.classes_.tolist())}")
    typer.echo(f"snapshot: {summary.snapshot}")
    if summary.rows_rejected:
        typer.echo(f"rejected rows: {config.rejects_dir}")
    _report_run(logged)


def _tracking_server(mlflow: bool, register: str | None, timeout: float) -> str | None:
    """The tracking URI with --mlflow, once its server answered; None without."""
    if register is not None and not mlflow:
        raise ConfigError("--register names the model --mlflow logs: add --mlflow.")
    return tracking.check_server(timeout) if mlflow else None


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
    out: Path = typer.Option(..., "--out", envvar=env("OUT"),
                             help="Parquet file to write (--engine spark: a folder of Parquet parts)."),
    proba: bool = typer.Option(False, "--proba", envvar=env("PROBA"),
                               help="Add a proba_<class> column per class."),
    id_column: str | None = typer.Option(None, "--id", envvar=env("ID"),
                                            help="Column passed through to identify each row."),
    skip_invalid: bool = SKIP_INVALID,
    batch_size: int = BATCH_SIZE,
    progress: bool | None = PROGRESS,
    *,
    engine: EngineOptions,
) -> None:
    """Predict a label for every row; one output row per input row."""
    from ..batch import spark
    from ..batch.score import predict as run_predict

    config = ScoreConfig(snapshot=snapshot, paths=paths or [], batch_size=batch_size, skip_invalid=skip_invalid)
    with reported_errors():
        engine.check_sources(config.paths)
        rows = spark.predict(config, out, proba, id_column, engine) if engine.spark else \
            run_predict(config, out, proba, id_column, progress=progress)
    typer.echo(f"wrote {rows:,} predictions to {out}")


@app.command()
@engine_options
def evaluate(
    snapshot: Path = SNAPSHOT,
    paths: list[str] | None = SOURCES,
    label: str | None = typer.Option(None, "--label", envvar=env("LABEL"),
                                        help="Label column (default: the one the model was trained on)."),
    as_json: bool = typer.Option(False, "--json", envvar=env("JSON"), help="Print the metrics as JSON."),
    prequential: bool = typer.Option(False, "--prequential", envvar=env("PREQUENTIAL"),
                                     help="Test-then-train: predict each row with the snapshot's model plus every "
                                          "earlier row (files in order), then learn it; the snapshot is not "
                                          "changed."),
    skip_invalid: bool = SKIP_INVALID,
    batch_size: int = BATCH_SIZE,
    progress: bool | None = PROGRESS,
    mlflow: bool = MLFLOW,
    mlflow_timeout: float = MLFLOW_TIMEOUT,
    register: str | None = REGISTER,
    *,
    engine: EngineOptions,
) -> None:
    """Accuracy, macro-F1, log-loss, Brier score, per-class precision/recall and the confusion matrix.

    Exit status 3: the metrics are printed, but --mlflow could not log the run.
    """
    from ..batch import spark
    from ..batch.score import evaluate as run_evaluate

    config = ScoreConfig(snapshot=snapshot, paths=paths or [], batch_size=batch_size, skip_invalid=skip_invalid)
    with reported_errors():
        tracking_uri = _tracking_server(mlflow, register, mlflow_timeout)
        engine.check_sources(config.paths)
        if prequential and engine.spark:
            raise ConfigError("--prequential replays the rows in order on one machine: use --engine local.")
        report = spark.evaluate(config, label, engine) if engine.spark else \
            run_evaluate(config, label, progress=progress, prequential=prequential)
        logged = _log_run(lambda: tracking.log_evaluation(tracking_uri, config, label, report, register,
                                                          mlflow_timeout)) if tracking_uri else None
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
            as_json: bool = typer.Option(False, "--json", envvar=env("JSON"), help="Print the header as JSON.")
            ) -> None:
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
          out: Path = typer.Option(..., "--out", envvar=env("OUT"), help="Merged snapshot to write.")) -> None:
    """Merge snapshots of the same kind and features into one model (exactly as if trained on all)."""
    from ..batch.merge import merge_snapshots

    with reported_errors():
        model, overlaps = merge_snapshots(snapshots, out)
    for overlap in overlaps:
        typer.echo(f"warning: {overlap}", err=True)
    typer.echo(f"merged {len(snapshots)} snapshots: {model.n_examples_seen_:,} examples, "
               f"{len(model.classes_)} classes -> {out}")
