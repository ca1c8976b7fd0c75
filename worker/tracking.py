"""Runs logged to an MLflow tracking server (``worker train --mlflow``, ``worker evaluate --mlflow``).

The server is the one ``MLFLOW_TRACKING_URI`` names (MLflow's own variable; so are
``MLFLOW_TRACKING_TOKEN`` and the others it reads for credentials, which nothing here prints). It is
asked whether it answers before the command starts its work: a server that does not is one error
line, not a failure after an hour of training. ``MLFLOW_RUN_ID`` set: the run of that id is
continued (``evaluate`` then adds its metrics to the run ``train`` logged).
"""

from __future__ import annotations

import logging
import os
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow.parquet as pq

from nbstream.arrow import Pipeline, load_pipeline
from nbstream.base import NaiveBayes
from nbstream.optional import optional_module

from .config import ScoreConfig, TrainConfig
from .errors import ConfigError, UserError
from .io.parquet.source import expand_paths

if TYPE_CHECKING:
    from .batch.train import TrainSummary

URI_VARIABLE = "MLFLOW_TRACKING_URI"
EXAMPLE_ROWS = 5  # rows of the input example logged with the model
ANSWER_SECONDS = 10.0


def shown_uri(uri: str) -> str:
    """The URI as it may be printed: without a user name or password."""
    parts = urllib.parse.urlsplit(uri)
    if parts.username is None and parts.password is None:
        return uri
    host = parts.hostname or ""
    return urllib.parse.urlunsplit(parts._replace(netloc=host + (f":{parts.port}" if parts.port else "")))


def check_server() -> str:
    """The tracking URI, once its server answered (an http(s) server's /health); ConfigError when
    none is set, UserError when it does not answer."""
    optional_module("mlflow", "mlflow")  # missing: said now, not after the work
    uri = os.environ.get(URI_VARIABLE, "").strip()
    if not uri:
        raise ConfigError(f"--mlflow logs to the MLflow tracking server {URI_VARIABLE} names: set it "
                          f"(http://HOST:PORT of an mlflow server).")
    if urllib.parse.urlsplit(uri).scheme in ("http", "https"):
        try:
            with urllib.request.urlopen(shown_uri(uri).rstrip("/") + "/health", timeout=ANSWER_SECONDS):
                pass
        except urllib.error.HTTPError:
            pass  # it answered: what a server behind a proxy says about /health is its own affair
        except (OSError, ValueError) as error:
            reason = getattr(error, "reason", error)
            raise UserError(f"the MLflow tracking server at {shown_uri(uri)} ({URI_VARIABLE}) does not answer "
                            f"({reason}): start it, or point {URI_VARIABLE} at one that runs.") from None
    return uri


def input_example(paths: list[str], columns: list[str]) -> Any:
    """The first rows of the first file, the feature columns only, as a pandas DataFrame; None when
    the data is not local files (Spark's hdfs:// or a catalog table): the model is logged without."""
    files = _local_files(paths)
    if not files:
        return None
    batch = next(pq.ParquetFile(files[0]).iter_batches(batch_size=EXAMPLE_ROWS, columns=columns), None)
    return None if batch is None else batch.to_pandas()


def _local_files(paths: list[str]) -> list[str]:
    """The Parquet files the paths name on this machine (none for what only Spark reads)."""
    try:
        return expand_paths(paths) if paths else []
    except (UserError, OSError):
        return []


def model_params(model: NaiveBayes[Any, Any]) -> dict[str, str]:
    """The model's kind and constructor parameters, as MLflow params."""
    return {"model": model.kind, **{f"model.{name}": str(value) for name, value in model.get_params().items()}}


@dataclass
class LoggedRun:
    """Where a command's run went: the run, its experiment, the logged model and its registered version."""
    uri: str
    run_id: str
    experiment_id: str
    model_uri: str
    registered: tuple[str, str] | None

    def to_json(self) -> dict[str, Any]:
        return {"tracking_uri": shown_uri(self.uri), "run_id": self.run_id, "experiment_id": self.experiment_id,
                "model_uri": self.model_uri,
                "registered_model": None if self.registered is None else
                {"name": self.registered[0], "version": self.registered[1]}}

    def describe(self) -> list[str]:
        lines = [f"mlflow run: {self.run_id} (experiment {self.experiment_id}) at {shown_uri(self.uri)}",
                 f"mlflow model: {self.model_uri}"]
        if self.registered:
            lines.append(f"registered model: {self.registered[0]} version {self.registered[1]}")
        return lines


def log_run(uri: str, *, params: dict[str, str], metrics: dict[str, float], model: NaiveBayes[Any, Any] | Pipeline,
            example: Any, register: str | None) -> LoggedRun:
    """Log params, metrics and the model (a model or pipeline: ``nbstream.mlflow``) to a run of the
    server at ``uri``; register the model as a new version of ``register`` when given."""
    mlflow = optional_module("mlflow", "mlflow")
    import nbstream.mlflow

    # MLflow's info lines and the links it writes to stdout (the URI as given, in the middle of
    # evaluate's JSON) are not the worker's to print: LoggedRun.describe says where the run went.
    logging.getLogger("mlflow").setLevel(logging.WARNING)
    try:  # MLflow reads the server from MLFLOW_TRACKING_URI itself
        with _environment(MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT="true"), mlflow.start_run() as run:
            mlflow.log_params(params)
            mlflow.log_metrics(metrics)
            info = nbstream.mlflow.log_model(model, name="model", input_example=example,
                                             registered_model_name=register)
    except mlflow.exceptions.MlflowException as error:
        raise UserError(f"MLflow at {shown_uri(uri)}: {str(error.message).strip().splitlines()[0]}") from None
    registered = (register, str(info.registered_model_version)) if register else None
    return LoggedRun(uri, run.info.run_id, run.info.experiment_id, info.model_uri, registered)


@contextmanager
def _environment(**variables: str) -> Iterator[None]:
    """These environment variables set while the block runs, then as they were."""
    before = {name: os.environ.get(name) for name in variables}
    os.environ.update(variables)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def log_training(uri: str, config: TrainConfig, summary: TrainSummary, register: str | None) -> LoggedRun:
    """The run of ``worker train``: its settings, its counters and the pipeline it wrote."""
    params = {**model_params(summary.model), "features": summary.features.describe(), "label": config.label,
              "train.data": _data_param(config.paths), "train.batch_size": str(config.batch_size)}
    metrics = {"rows_learned": summary.rows_learned, "rows_rejected": summary.rows_rejected,
               "train_seconds": summary.seconds}
    pipeline = load_pipeline(summary.snapshot)
    return log_run(uri, params=params, metrics=metrics, model=pipeline,
                   example=input_example(config.paths, pipeline.features.columns), register=register)


def log_evaluation(uri: str, config: ScoreConfig, label: str | None, report: dict[str, Any],
                   register: str | None) -> LoggedRun:
    """The run of ``worker evaluate``: the model's settings, the quality measured and the model."""
    pipeline = load_pipeline(config.snapshot)
    params = {**model_params(pipeline.model), "features": pipeline.features.describe(),
              "evaluate.snapshot": str(config.snapshot), "evaluate.data": _data_param(config.paths),
              "evaluate.label": str(label or pipeline.label)}
    metrics = {name: float(report[name]) for name in ("accuracy", "macro_f1", "log_loss", "brier")}
    metrics["rows_evaluated"], metrics["rows_skipped"] = report["rows"], report["rows_skipped"]
    return log_run(uri, params=params, metrics=metrics, model=pipeline,
                   example=input_example(config.paths, pipeline.features.columns), register=register)


def _data_param(paths: list[str]) -> str:
    """The data a run read, short enough for an MLflow param: the first path and how many more."""
    files = _local_files(paths) or paths
    if not files:
        return "a catalog table"
    return files[0] + (f" (and {len(files) - 1} more)" if len(files) > 1 else "")
