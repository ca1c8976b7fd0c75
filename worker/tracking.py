"""Runs logged to an MLflow tracking server (``worker train --mlflow``, ``worker evaluate --mlflow``).

The server is the one ``MLFLOW_TRACKING_URI`` names (MLflow's own variable; so are
``MLFLOW_TRACKING_TOKEN`` and the others it reads for credentials, which nothing here prints). It is
asked whether it answers before the command starts its work: a server that does not is one error
line, not a failure after an hour of training. ``MLFLOW_RUN_ID`` set: the run of that id is
continued (``evaluate`` then adds its metrics to the run ``train`` logged).

Every network step is bounded (``--mlflow-timeout``): the health check's whole answer, each of
MLflow's requests (its own variables ``MLFLOW_HTTP_REQUEST_TIMEOUT``, ``..._MAX_RETRIES``,
``..._BACKOFF_FACTOR`` and ``..._BACKOFF_JITTER`` are set while the run is logged, unless the user
set them) and the logging of the whole run, which runs in a thread the command stops waiting for
at the deadline. Whatever MLflow says of a failure is printed as one short line, credentials
masked (``worker.redaction``).
"""

from __future__ import annotations

import logging
import math
import os
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import pyarrow.parquet as pq

from nbstream.arrow import Pipeline, load_pipeline
from nbstream.naive_bayes import NaiveBayes
from nbstream.utils.optional import optional_module

from .config import ScoreConfig, TrainConfig
from .errors import ConfigError, UserError
from .io.parquet.source import expand_paths
from .redaction import keep_secret, keep_uri_secrets, shown_line
from .redaction import without_userinfo as shown_uri
from .setting import Checked, setting

if TYPE_CHECKING:
    from .batch.train import TrainSummary

URI_VARIABLE = "MLFLOW_TRACKING_URI"
CREDENTIAL_VARIABLES = ("MLFLOW_TRACKING_PASSWORD", "MLFLOW_TRACKING_TOKEN")  # MLflow's own, never printed
EXAMPLE_ROWS = 5  # rows of the input example logged with the model
TIMEOUT_SECONDS = 120.0  # default of --mlflow-timeout: the logging of a whole run
REQUEST_SECONDS = 30  # each request at most (at most the timeout too): the health check's whole answer,
# and the wait for each of MLflow's answers (MLFLOW_HTTP_REQUEST_TIMEOUT bounds each wait for data)
CLIENT_SETTINGS = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2", "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
                   "MLFLOW_HTTP_REQUEST_BACKOFF_JITTER": "0.5"}  # MLflow's: 7 retries, up to minutes apart

T = TypeVar("T")


@dataclass(frozen=True)
class TrackingOptions(Checked):
    """Whether a run is logged to MLflow (train and evaluate), how long that may take, and the name
    its model is registered under."""
    mlflow: bool = setting(False, "--mlflow",
                           help="Log the run (parameters, metrics, the model) to the MLflow tracking server "
                                "MLFLOW_TRACKING_URI names (pip install 'nbstream\\[mlflow]'). A run that cannot be "
                                "logged once the work is done is one line and exit status 3; the work (the snapshot) "
                                "is kept.")
    timeout: float = setting(TIMEOUT_SECONDS, "--mlflow-timeout", low=0.1,
                             help=f"With --mlflow: seconds the whole logging of the run may take; each request (the "
                                  f"server's health check before the work too) at most {REQUEST_SECONDS} of them.")
    register: str | None = setting(None, "--register",
                                   help="With --mlflow: register the logged model as a new version of this name.")

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.register is not None and not self.mlflow:
            raise ConfigError("--register names the model --mlflow logs: add --mlflow.")

    def server(self) -> str | None:
        """The tracking URI with --mlflow, once its server answered (``check_server``); None without."""
        return check_server(self.timeout) if self.mlflow else None


class TrackingFailed(Exception):
    """The run was not logged (the command's own work is done and kept); the message is one line,
    credentials masked, that says which step failed and why."""


class DeadlinePassed(TimeoutError):
    """Work that ``within`` gave up waiting for."""


def request_seconds(timeout: float) -> int:
    """The deadline of one request under ``timeout`` for the whole: whole seconds, as MLflow takes it."""
    return max(1, math.ceil(min(REQUEST_SECONDS, timeout)))


def check_server(timeout: float = TIMEOUT_SECONDS) -> str:
    """The tracking URI, once its server answered (an http(s) server's /health, its whole answer within
    ``request_seconds(timeout)``); ConfigError when none is set, UserError when it does not answer.
    The URI's password and MLflow's credential variables are never written from now on."""
    optional_module("mlflow", "mlflow")  # missing: said now, not after the work
    uri = os.environ.get(URI_VARIABLE, "").strip()
    if not uri:
        raise ConfigError(f"--mlflow logs to the MLflow tracking server {URI_VARIABLE} names: set it "
                          f"(http://HOST:PORT of an mlflow server).")
    keep_uri_secrets(uri)
    for name in CREDENTIAL_VARIABLES:
        keep_secret(os.environ.get(name, ""))
    if urllib.parse.urlsplit(uri).scheme in ("http", "https"):
        seconds = request_seconds(timeout)
        try:
            within(seconds, lambda: _answers(shown_uri(uri).rstrip("/") + "/health", seconds))
        except (OSError, ValueError) as error:
            reason = shown_line(str(getattr(error, "reason", error)))
            raise UserError(f"the MLflow tracking server at {shown_uri(uri)} ({URI_VARIABLE}) does not answer "
                            f"({reason}): start it, or point {URI_VARIABLE} at one that runs.") from None
    return uri


def _answers(url: str, seconds: float) -> None:
    """Returns once the server at ``url`` answered, whatever the HTTP status (what a server behind a
    proxy says about /health is its own affair); OSError when it cannot be reached."""
    try:
        with urllib.request.urlopen(url, timeout=seconds):
            pass
    except urllib.error.HTTPError:
        pass


def within(seconds: float, work: Callable[[], T]) -> T:
    """What ``work()`` returns, or raises, when it ends within ``seconds``; DeadlinePassed when it does
    not. It runs in a daemon thread, left to end with the process when it outlives the deadline: no
    library call can be stopped from outside in Python, and a socket's timeout bounds each read, not
    the whole answer."""
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["value"] = work()
        except BaseException as error:  # noqa: BLE001 - handed to the caller, which raises it
            outcome["error"] = error

    thread = threading.Thread(target=run, name="mlflow-tracking", daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        raise DeadlinePassed(f"no complete answer within {seconds:g} s")
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]  # type: ignore[no-any-return]


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
            example: Any, register: str | None, timeout: float = TIMEOUT_SECONDS) -> LoggedRun:
    """Log params, metrics and the model (a model or pipeline: ``nbstream.mlflow``) to a run of the
    server at ``uri``; register the model as a new version of ``register`` when given. TrackingFailed
    when any of it fails, or when it has not ended within ``timeout`` seconds."""
    mlflow = optional_module("mlflow", "mlflow")
    import nbstream.mlflow

    # MLflow's info lines and the links it writes to stdout (the URI as given, in the middle of
    # evaluate's JSON) are not the worker's to print: LoggedRun.describe says where the run went;
    # nor are urllib3's lines about each retry: TrackingFailed says how it ended.
    logging.getLogger("mlflow").setLevel(logging.WARNING)
    logging.getLogger("urllib3").setLevel(logging.ERROR)
    step = ["starting the run"]  # what the thread is doing: the step that failed, or ran out of time

    def log() -> tuple[Any, Any]:
        with mlflow.start_run() as run:  # MLflow reads the server from MLFLOW_TRACKING_URI itself
            step[0] = "logging the parameters and metrics"
            mlflow.log_params(params)
            mlflow.log_metrics(metrics)
            step[0] = "logging the model" + (f" and registering it as {register}" if register else "")
            info = nbstream.mlflow.log_model(model, name="model", input_example=example,
                                             registered_model_name=register)
            step[0] = "ending the run"
        return run, info

    try:
        with _environment(**_client_settings(timeout)):
            run, info = within(timeout, log)
    except DeadlinePassed:
        raise TrackingFailed(f"MLflow at {shown_uri(uri)}: {step[0]} did not end within {timeout:g} s "
                             f"(--mlflow-timeout)") from None
    except Exception as error:  # noqa: BLE001 - whatever MLflow or its HTTP client raise: the run was not logged
        reason = str(error) if isinstance(error, mlflow.exceptions.MlflowException) else \
            f"{type(error).__name__}: {error}"
        raise TrackingFailed(f"MLflow at {shown_uri(uri)}: {step[0]} failed: {shown_line(reason)}") from None
    registered = (register, str(info.registered_model_version)) if register else None
    return LoggedRun(uri, run.info.run_id, run.info.experiment_id, info.model_uri, registered)


def _client_settings(timeout: float) -> dict[str, str]:
    """The environment MLflow's client runs in while a run is logged: no links printed, each request
    bounded, few retries a short backoff apart (the user's own settings of these stay)."""
    bounds = {"MLFLOW_HTTP_REQUEST_TIMEOUT": str(request_seconds(timeout)), **CLIENT_SETTINGS}
    return {"MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT": "true",
            **{name: value for name, value in bounds.items() if name not in os.environ}}


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


def log_training(uri: str, config: TrainConfig, summary: TrainSummary, register: str | None,
                 timeout: float = TIMEOUT_SECONDS) -> LoggedRun:
    """The run of ``worker train``: its settings, its counters and the pipeline it wrote."""
    params = {**model_params(summary.model), "features": summary.features.describe(), "label": config.label,
              "train.data": _data_param(config.paths), "train.batch_size": str(config.batch_size)}
    metrics = {"rows_learned": summary.rows_learned, "rows_rejected": summary.rows_rejected,
               "train_seconds": summary.seconds}
    pipeline = load_pipeline(summary.snapshot)
    return log_run(uri, params=params, metrics=metrics, model=pipeline,
                   example=input_example(config.paths, pipeline.features.columns), register=register,
                   timeout=timeout)


def log_evaluation(uri: str, config: ScoreConfig, label: str | None, report: dict[str, Any],
                   register: str | None, timeout: float = TIMEOUT_SECONDS) -> LoggedRun:
    """The run of ``worker evaluate``: the model's settings, the quality measured and the model."""
    pipeline = load_pipeline(config.snapshot)
    params = {**model_params(pipeline.model), "features": pipeline.features.describe(),
              "evaluate.snapshot": str(config.snapshot), "evaluate.data": _data_param(config.paths),
              "evaluate.label": str(label or pipeline.label)}
    metrics = {name: float(report[name]) for name in ("accuracy", "macro_f1", "log_loss", "brier")}
    metrics["rows_evaluated"], metrics["rows_skipped"] = report["rows"], report["rows_skipped"]
    return log_run(uri, params=params, metrics=metrics, model=pipeline,
                   example=input_example(config.paths, pipeline.features.columns), register=register,
                   timeout=timeout)


def _data_param(paths: list[str]) -> str:
    """The data a run read, short enough for an MLflow param: the first path and how many more."""
    files = _local_files(paths) or paths
    if not files:
        return "a catalog table"
    return files[0] + (f" (and {len(files) - 1} more)" if len(files) > 1 else "")
