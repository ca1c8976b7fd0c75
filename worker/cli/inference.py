"""The inference API's own command: serve-model (a snapshot answering Open Inference Protocol requests)."""

from __future__ import annotations

import logging
from pathlib import Path

import typer

from ..inference.config import InferenceApiConfig
from ..service.config import TelemetryConfig
from ..service.models.config import ModelsConfig
from ..service.telemetry.logs import LEVELS
from .app import app, reported_errors
from .options import Given, setting_option, settings_part

MODEL = typer.Argument(..., help="A snapshot written by worker train, export or serve --snapshot-dir, or a "
                                 "--snapshot-dir folder (its newest copy).", show_default=False)


@app.command("serve-model")
@settings_part("api", InferenceApiConfig)
def serve_model(model: Path = MODEL,
                model_name: str | None = setting_option(ModelsConfig, "model_name", help=(
                    "The name requests give the model (default: the snapshot's file name without .nbs).")),
                reload: bool = typer.Option(False, "--reload/--no-reload", envvar="NBSTREAM_RELOAD",
                                            help="Answer each request with the snapshot on disk now: one "
                                                 "replaced since it was read is read again (one that does not "
                                                 "load is refused and the model before keeps answering)."),
                json_logs: bool = setting_option(TelemetryConfig, "json_logs"),
                log_level: str = setting_option(TelemetryConfig, "log_level"), *,
                api: Given) -> None:
    """Answer Open Inference Protocol (v2 REST) requests from a snapshot, with no Kafka: the API of
    `worker serve --http-port`, for a model that left the stream (KServe, Triton's and MLServer's
    clients speak it). Runs until SIGTERM or SIGINT."""
    from ..inference.run import serve_snapshot
    from ..service.telemetry.logs import configure_logging

    configure_logging(json_logs, log_level if log_level in LEVELS else "info")
    with reported_errors(logging.getLogger("worker.serve_model")):
        config: InferenceApiConfig = api.build()
        serve_snapshot(model, model_name, reload, config)
