"""The Kafka commands: serve (the prequential service), export (its model as a file), produce (rows in).

Each command builds a config from its options, delegates, and prints the outcome.
"""

from __future__ import annotations

import logging
from typing import Any

import typer

from ..errors import UserError
from ..service.config import SETTING_PARTS, ServeConfig
from ..service.export import ExportRequest
from ..tools.produce import ProduceRequest
from .app import app, reported_errors
from .flags import CommandFlags
from .options import (
    PATHS,
    Given,
    kafka_options,
    model_parameters,
    registry_options,
    setting_option,
    settings_options,
    settings_part,
)

serve_options = settings_options("parts", SETTING_PARTS)
"""Gives `worker serve` its options, one dataclass per concern (``worker/service/config.py``)."""


@app.command()
@kafka_options
@registry_options
@model_parameters
@serve_options
def serve(*, kafka: Given, registry: Given, model_parameters: dict[str, Any],
          parts: dict[str, Given]) -> None:
    """Serve predictions for a Kafka topic and learn from its labeled messages (prequential).

    Every message gets a prediction on --output; labeled ones are then learned from. Run several
    replicas with the same --group to scale out: each partition's state lives in the state topic,
    and every replica predicts with the merge of all of them. Each commit (every
    --checkpoint-every messages or --checkpoint-interval seconds, before partitions move, and at
    SIGTERM/SIGINT) writes predictions, dead letters, partition states and offsets together.
    """
    from ..service.serve import serve as run_serve
    from ..service.telemetry.logs import LEVELS, configure_logging

    telemetry = parts["telemetry"].values
    configure_logging(telemetry["json_logs"], telemetry["log_level"] if telemetry["log_level"] in LEVELS else "info")
    with reported_errors(logging.getLogger("worker.serve")):
        built = {part: given.build() for part, given in parts.items() if part != "model"}
        config = ServeConfig(kafka=kafka.build(), schema_registry=registry.build(),
                             model=parts["model"].build(parameters=model_parameters), **built)
        run_serve(config)


@app.command()
@kafka_options
@settings_part("request", ExportRequest)
def export(*, kafka: Given, request: Given) -> None:
    """Write a serving group's current model (every partition's committed state, merged) as a snapshot."""
    from ..io.kafka.client import KafkaFailure
    from ..io.kafka.connect import connect
    from ..service.export import export as run_export

    with reported_errors():
        asked: ExportRequest = request.build()
        settings = kafka.build()
        try:
            exported = run_export(connect(settings), asked.input, asked.states, asked.out, asked.model_name,
                                  model_key=asked.model_key)
        except KafkaFailure as failure:
            raise UserError(f"cannot read the state from Kafka at {settings.bootstrap}: {failure}") from None
    model = exported.model
    named = f" of model {exported.name}" if exported.named else ""
    if asked.model_key is not None:
        named += f" backed off for the key {asked.model_key!r}"
    typer.echo(f"exported {model.n_examples_seen_:,} examples{named}, {len(model.classes_)} classes, offsets "
               f"{dict(sorted(exported.offsets.items()))} -> {asked.out}")


@app.command()
@kafka_options
@registry_options
@settings_options("given", {"request": ProduceRequest})
def produce(paths: list[str] = PATHS, progress: bool | None = setting_option(CommandFlags, "progress"), *,
            kafka: Given, registry: Given, given: dict[str, Given]) -> None:
    """Send Parquet rows to a topic as JSON, Avro or Arrow messages (for demos and benchmarks); every one is
    confirmed."""
    from ..io.kafka.client import KafkaFailure
    from ..io.kafka.connect import connect
    from ..io.registry.client import RegistryUnavailable
    from ..tools.produce import produce as run_produce

    with reported_errors():
        request = given["request"].build(paths=paths)
        settings = kafka.build()
        try:
            result = run_produce(connect(settings), request, registry=registry.build(), progress=progress)
        except KafkaFailure as failure:
            raise UserError(f"Kafka at {settings.bootstrap}: {failure}") from None
        except RegistryUnavailable as failure:
            raise UserError(str(failure)) from None
    topic, labels_topic = request.topic, request.labels_topic
    if result.failed:
        typer.echo(f"error: {result.failed:,} of {result.sent:,} messages were not delivered to {topic} "
                   f"(first: {result.error})", err=True)
        raise typer.Exit(code=1)
    rows = f" ({result.rows:,} rows)" if result.rows != result.sent else ""
    labels = f" and {result.labels:,} labels to {labels_topic}" if labels_topic else ""
    typer.echo(f"sent {result.sent:,} messages{rows} to {topic}{labels}")
