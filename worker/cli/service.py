"""The Kafka commands: serve (the prequential service), export (its model as a file), produce (rows in).

Each command builds a config from its options, delegates, and prints the outcome.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import typer

from ..config import MOST_PENDING, ModelOptions, ServeConfig, parse_classes, parse_duration
from ..errors import UserError
from ..io.fields import MessageFields
from .app import app, reported_errors
from .options import (
    HASH_BITS,
    MAX_CLASSES,
    NGRAMS,
    PATHS,
    PROGRESS,
    KafkaOptions,
    RegistryOptions,
    columns,
    env,
    kafka_options,
    model_parameters,
    registry_options,
)


@app.command()
@kafka_options
@registry_options
@model_parameters
def serve(
    input_topic: str = typer.Option(..., "--input", envvar=env("INPUT"), help="Topic of examples."),
    output_topic: str = typer.Option(..., "--output", envvar=env("OUTPUT"), help="Topic for predictions."),
    message_format: str = typer.Option("json", "--format", envvar=env("FORMAT"),
                                       help="json: one example per message (a JSON object); arrow: an Arrow IPC "
                                            "stream of many rows per message (columns as in Parquet), answered "
                                            "by one Arrow stream of predictions per message; avro, "
                                            "json-schema, protobuf: one Avro record, JSON object or Protobuf "
                                            "message per message in the Confluent wire format, its schema in "
                                            "--schema-registry (fields as in JSON), answered in JSON."),
    output_format: str = typer.Option("json", "--output-format", envvar=env("OUTPUT_FORMAT"),
                                      help="json: each prediction a JSON object; avro: an Avro record in the "
                                           "Confluent wire format, its schema registered under OUTPUT-value "
                                           "in --schema-registry."),
    group: str = typer.Option(..., "--group", envvar=env("GROUP"),
                              help="Consumer group id: every replica of one service uses the same."),
    guarantee: str = typer.Option("exactly-once", "--guarantee", envvar=env("GUARANTEE"),
                                  help="exactly-once: predictions, dead letters, state and offsets commit in one "
                                       "Kafka transaction; at-least-once: a crash may repeat predictions."),
    snapshot_dir: Path | None = typer.Option(None, "--snapshot-dir", envvar=env("SNAPSHOT_DIR"),
                                                help="Keep a local copy of the group's model here, at the "
                                                     "first commit --snapshot-interval seconds after the last "
                                                     "copy and at shutdown (also: a first start from such a "
                                                     "copy)."),
    init_model: Path | None = typer.Option(None, "--init-model", envvar=env("INIT_MODEL"),
                                              help="Start a new group from this worker train snapshot (its "
                                                   "model and features) and keep learning."),
    learn: bool = typer.Option(True, "--learn/--no-learn", envvar=env("LEARN"),
                               help="Learn from labeled messages, or only predict (labels ignored)."),
    model: str = typer.Option("multinomial", "--model", envvar=env("MODEL"),
                              help="bernoulli, multinomial, complement, gaussian or categorical."),
    text: bool = typer.Option(False, "--text", envvar=env("SERVE_TEXT"),
                              help="Messages carry text (in --text-field), hashed into features."),
    feature_names: str | None = typer.Option(None, "--feature-names", envvar=env("FEATURE_NAMES"),
                                                help="Keys of a features object, comma-separated "
                                                     "(default: features is a list of numbers)."),
    hash_bits: int = HASH_BITS,
    ngrams: int = NGRAMS,
    max_classes: int = MAX_CLASSES,
    classes: str | None = typer.Option(None, "--classes", envvar=env("CLASSES"),
                                          help="Fixed class set, comma-separated (numbers if all are); other "
                                               "labels go to the dead-letter topic (default: open, grows)."),
    checkpoint_every: int = typer.Option(50_000, "--checkpoint-every", min=1, envvar=env("CHECKPOINT_EVERY"),
                                         help="Commit after this many messages..."),
    max_poll_records: int = typer.Option(10_000, "--max-poll-records", min=1, envvar=env("MAX_POLL_RECORDS"),
                                         help="Messages processed together at most (more: faster under load)."),
    checkpoint_interval: float = typer.Option(0.5, "--checkpoint-interval", min=0.1,
                                              envvar=env("CHECKPOINT_INTERVAL"),
                                              help="...or seconds (under exactly-once, how long predictions "
                                                   "wait to become visible)."),
    transaction_timeout: float = typer.Option(60.0, "--transaction-timeout", min=1, max=900,
                                              envvar=env("TRANSACTION_TIMEOUT"),
                                              help="Seconds before the broker aborts a transaction left open "
                                                   "by a replica that died (at most 900, brokers' default "
                                                   "transaction.max.timeout.ms)."),
    start: str = typer.Option("earliest", "--start", envvar=env("START"),
                              help="Where a partition without saved state starts: earliest or latest."),
    output_timestamp: str = typer.Option("input", "--output-timestamp", envvar=env("OUTPUT_TIMESTAMP"),
                                         help="A prediction's timestamp: input (its input message's, for "
                                              "event-time processing downstream) or now (when it is sent)."),
    drift_detector: str = typer.Option("none", "--drift-detector", envvar=env("DRIFT_DETECTOR"),
                                       help="Watch each partition's prequential errors for a drift with adwin "
                                            "or page-hinkley (each one a WARNING line and counted), or none."),
    on_drift: str = typer.Option("report", "--on-drift", envvar=env("ON_DRIFT"),
                                 help="report a drift only, or reset-to-window: drop the partition's window "
                                      "buckets from before the change (needs --window)."),
    labels_topic: str | None = typer.Option(None, "--labels-topic", envvar=env("LABELS_TOPIC"),
                                               help="Topic of labels that come later: JSON objects with "
                                                    "--id-field and --label-field, keyed like the message they "
                                                    "label (same partition count as --input). A message with an "
                                                    "id and no label waits for its label, then is learned and "
                                                    "its served prediction judged."),
    label_ttl: str = typer.Option("7d", "--label-ttl", envvar=env("LABEL_TTL"),
                                  help="How long a message waits for its label, by its event time (90s, 15m, "
                                       "36h, 7d)."),
    max_pending: int = typer.Option(100_000, "--max-pending", min=1, max=MOST_PENDING, envvar=env("MAX_PENDING"),
                                    help="Messages waiting for their label per partition at most (the oldest "
                                         "give way; as many labels waiting for their message)."),
    dlq_unmatched_labels: bool = typer.Option(False, "--dlq-unmatched-labels", envvar=env("DLQ_UNMATCHED_LABELS"),
                                              help="Send a label whose message never came within --label-ttl "
                                                   "(never seen, or expired) to the dead-letter topic; otherwise "
                                                   "it is only counted."),
    dead_letter_topic: str | None = typer.Option(None, "--dlq", envvar=env("DLQ"),
                                                    help="Dead-letter topic (default: INPUT.dlq)."),
    state_topic: str | None = typer.Option(None, "--state-topic", envvar=env("STATE_TOPIC"),
                                              help="Compacted topic of the partitions' states "
                                                   "(default: INPUT.GROUP.nbstream-state)."),
    keep_snapshots: int = typer.Option(3, "--keep-snapshots", min=1, envvar=env("KEEP_SNAPSHOTS")),
    snapshot_interval: float = typer.Option(60.0, "--snapshot-interval", min=0, envvar=env("SNAPSHOT_INTERVAL"),
                                            help="Seconds between local copies in --snapshot-dir at least (0: "
                                                 "after every commit)."),
    metrics_port: int | None = typer.Option(None, "--metrics-port", envvar=env("METRICS_PORT"),
                                               help="Serve /metrics, /healthz, /readyz on this port."),
    metrics_host: str = typer.Option("127.0.0.1", "--metrics-host", envvar=env("METRICS_HOST"),
                                     help="Address for the endpoints (0.0.0.0 in a container)."),
    max_message_bytes: int = typer.Option(1_048_576, "--max-message-bytes", min=1, envvar=env("MAX_MESSAGE_BYTES"),
                                          help="Larger messages go to the dead-letter topic; so do Arrow messages "
                                               "that hold more once decompressed."),
    instance_id: str | None = typer.Option(None, "--instance-id", envvar=env("INSTANCE_ID"),
                                              help="Stable id of this replica in the group (static membership; "
                                                   "also names its transactions): a restart takes its "
                                                   "partitions back at once."),
    session_timeout: float = typer.Option(10.0, "--session-timeout", min=6, max=1800, envvar=env("SESSION_TIMEOUT"),
                                          help="Seconds before the group gives a silent replica's partitions away "
                                               "(6 to 1800, brokers' default group.min/max.session.timeout.ms)."),
    id_field: str = typer.Option("id", "--id-field", envvar=env("ID_FIELD")),
    features_field: str = typer.Option("features", "--features-field", envvar=env("FEATURES_FIELD")),
    text_field: str = typer.Option("text", "--text-field", envvar=env("TEXT_FIELD")),
    label_field: str = typer.Option("label", "--label-field", envvar=env("LABEL_FIELD")),
    json_logs: bool = typer.Option(False, "--json-logs", envvar=env("JSON_LOGS"),
                                   help="Every log line a JSON object (errors and crashes included)."),
    log_level: str = typer.Option("info", "--log-level", envvar=env("LOG_LEVEL"),
                                  help="debug, info, warning or error (debug also shows the Kafka client "
                                       "libraries' own lines)."),
    *,
    kafka: KafkaOptions,
    registry: RegistryOptions,
    model_parameters: dict[str, Any],
) -> None:
    """Serve predictions for a Kafka topic and learn from its labeled messages (prequential).

    Every message gets a prediction on --output; labeled ones are then learned from. Run several
    replicas with the same --group to scale out: each partition's state lives in the state topic,
    and every replica predicts with the merge of all of them. Each commit (every
    --checkpoint-every messages or --checkpoint-interval seconds, before partitions move, and at
    SIGTERM/SIGINT) writes predictions, dead letters, partition states and offsets together.
    """
    from ..service.serve import serve as run_serve
    from ..service.telemetry.logs import LEVELS, configure_logging

    configure_logging(json_logs, log_level if log_level in LEVELS else "info")
    with reported_errors(logging.getLogger("worker.serve")):
        if log_level not in LEVELS:
            raise UserError(f"--log-level must be one of {', '.join(LEVELS)}; got {log_level!r}.")
        config = ServeConfig(
            kafka=kafka.settings(),
            input=input_topic, output=output_topic, group=group, snapshot_dir=snapshot_dir,
            model=ModelOptions(kind=model, **model_parameters),
            fields=MessageFields(format=message_format, id=id_field, features=features_field, text=text_field,
                                 label=label_field, feature_names=columns(feature_names),
                                 max_bytes=max_message_bytes),
            text=text, hash_bits=hash_bits, ngrams=ngrams, classes=parse_classes(columns(classes)),
            dead_letter_topic=dead_letter_topic, state_topic=state_topic, guarantee=guarantee,
            checkpoint_every=checkpoint_every, checkpoint_interval=checkpoint_interval,
            transaction_timeout=transaction_timeout, start=start, keep_snapshots=keep_snapshots,
            snapshot_interval=snapshot_interval,
            metrics_port=metrics_port, metrics_host=metrics_host, instance_id=instance_id,
            session_timeout=session_timeout, learn=learn, init_model=init_model, max_poll_records=max_poll_records,
            max_classes=max_classes, output_timestamp=output_timestamp, drift_detector=drift_detector,
            on_drift=on_drift, schema_registry=registry.settings(), output_format=output_format,
            labels_topic=labels_topic,
            label_ttl=parse_duration(label_ttl, "--label-ttl"), max_pending=max_pending,
            dlq_unmatched_labels=dlq_unmatched_labels)
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
