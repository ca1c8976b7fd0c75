"""The Kafka commands: serve (the prequential service), export (its model as a file), produce (rows in).

Each command builds a config from its options, delegates, and prints the outcome.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import typer

from ..errors import UserError
from ..service.config import SETTING_PARTS, ServeConfig
from .app import app, reported_errors
from .options import (
    PATHS,
    PROGRESS,
    Given,
    KafkaOptions,
    RegistryOptions,
    env,
    kafka_options,
    model_parameters,
    registry_options,
    settings_options,
)

serve_options = settings_options("parts", SETTING_PARTS)
"""Gives `worker serve` its options, one dataclass per concern (``worker/service/config.py``)."""


@app.command()
@kafka_options
@registry_options
@model_parameters
@serve_options
def serve(*, kafka: KafkaOptions, registry: RegistryOptions, model_parameters: dict[str, Any],
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
        config = ServeConfig(kafka=kafka.settings(), schema_registry=registry.settings(),
                             model=parts["model"].build(parameters=model_parameters), **built)
        run_serve(config)


@app.command()
@kafka_options
def export(
    input_topic: str = typer.Option(..., "--input", envvar=env("INPUT"), help="The topic the group serves."),
    group: str = typer.Option(..., "--group", envvar=env("GROUP"), help="The group whose model to export."),
    out: Path = typer.Option(..., "--out", envvar=env("OUT"), help="Snapshot to write."),
    state_topic: str | None = typer.Option(None, "--state-topic", envvar=env("STATE_TOPIC"),
                                              help="The group's state topic (default: INPUT.GROUP.nbstream-state)."),
    *,
    kafka: KafkaOptions,
) -> None:
    """Write a serving group's current model (every partition's committed state, merged) as a snapshot."""
    from ..io.kafka.client import KafkaFailure
    from ..io.kafka.connect import connect
    from ..io.kafka.state_topic import state_topic_name
    from ..service.export import export as run_export

    with reported_errors():
        settings = kafka.settings()
        try:
            model, offsets = run_export(connect(settings), input_topic,
                                        state_topic or state_topic_name(group, input_topic), out)
        except KafkaFailure as failure:
            raise UserError(f"cannot read the state from Kafka at {settings.bootstrap}: {failure}") from None
    typer.echo(f"exported {model.n_examples_seen_:,} examples, {len(model.classes_)} classes, offsets "
               f"{dict(sorted(offsets.items()))} -> {out}")


@app.command()
@kafka_options
@registry_options
def produce(
    paths: list[str] = PATHS,
    topic: str = typer.Option(..., "--topic", envvar=env("TOPIC"), help="Topic to write to."),
    features: str | None = typer.Option(None, "--features", envvar=env("PRODUCE_FEATURES"),
                                        help="A list column, sent as \"features\"."),
    text: str | None = typer.Option(None, "--text", envvar=env("PRODUCE_TEXT"),
                                    help="A string column, sent as \"text\"."),
    label: str | None = typer.Option(None, "--label", envvar=env("PRODUCE_LABEL"),
                                     help="Label column, sent as \"label\"."),
    id_column: str | None = typer.Option(None, "--id", envvar=env("PRODUCE_ID"),
                                         help="Id column, sent as \"id\" and used as the key."),
    rate: float = typer.Option(0.0, "--rate", min=0, envvar=env("RATE"),
                               help="Rows per second (0: as fast as possible; else at least 0.001)."),
    limit: int | None = typer.Option(None, "--limit", min=1, envvar=env("LIMIT"), help="Stop after this many rows."),
    message_format: str = typer.Option("json", "--format", envvar=env("PRODUCE_FORMAT"),
                                       help="json: one row per message; avro, json-schema, protobuf: one Avro "
                                            "record, JSON object or Protobuf message per message in the "
                                            "Confluent wire format, its schema registered under TOPIC-value "
                                            "(needs --schema-registry); arrow: an "
                                            "Arrow IPC stream of --rows-per-message rows per message."),
    schema_id: int | None = typer.Option(None, "--schema-id", min=0, max=2**32 - 1, envvar=env("SCHEMA_ID"),
                                         help="avro, json-schema, protobuf: write by this schema of the "
                                              "registry (protobuf: its first message; default: one derived from "
                                              "the columns, registered under TOPIC-value).",
                                         rich_help_panel="Schema Registry"),
    rows_per_message: int = typer.Option(1000, "--rows-per-message", min=1, envvar=env("ROWS_PER_MESSAGE"),
                                         help="Rows per Arrow message."),
    labels_topic: str | None = typer.Option(None, "--labels-topic", envvar=env("PRODUCE_LABELS_TOPIC"),
                                               help="Send each row's label apart, as {\"id\", \"label\"} on this "
                                                    "topic keyed by the id (for worker serve --labels-topic); the "
                                                    "messages go without it. Needs --label and --id."),
    label_delay: int = typer.Option(0, "--label-delay", min=0, envvar=env("LABEL_DELAY"),
                                    help="With --labels-topic: messages sent between a row's message and its label."),
    progress: bool | None = PROGRESS,
    *,
    kafka: KafkaOptions,
    registry: RegistryOptions,
) -> None:
    """Send Parquet rows to a topic as JSON, Avro or Arrow messages (for demos and benchmarks); every one is
    confirmed."""
    from ..io.kafka.client import KafkaFailure
    from ..io.kafka.connect import connect
    from ..io.registry.client import RegistryUnavailable
    from ..tools.produce import produce as run_produce

    with reported_errors():
        settings = kafka.settings()
        try:
            result = run_produce(connect(settings), paths, topic, features=features, text=text, label=label,
                                 id_column=id_column, rate=rate, limit=limit, message_format=message_format,
                                 rows_per_message=rows_per_message, progress=progress,
                                 registry=registry.settings(), schema_id=schema_id, labels_topic=labels_topic,
                                 label_delay=label_delay)
        except KafkaFailure as failure:
            raise UserError(f"Kafka at {settings.bootstrap}: {failure}") from None
        except RegistryUnavailable as failure:
            raise UserError(str(failure)) from None
    if result.failed:
        typer.echo(f"error: {result.failed:,} of {result.sent:,} messages were not delivered to {topic} "
                   f"(first: {result.error})", err=True)
        raise typer.Exit(code=1)
    rows = f" ({result.rows:,} rows)" if result.rows != result.sent else ""
    labels = f" and {result.labels:,} labels to {labels_topic}" if labels_topic else ""
    typer.echo(f"sent {result.sent:,} messages{rows} to {topic}{labels}")
