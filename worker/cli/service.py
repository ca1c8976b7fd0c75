"""The Kafka commands: serve (the prequential service) and produce (Parquet rows into a topic).

Each command builds a config from its options, delegates, and prints the outcome.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from ..config import MessageFields, ServeConfig
from ..errors import ConfigError
from .app import app, reported_errors
from .options import (ALPHA, BINARIZE, FIT_PRIOR, HALF_LIFE, HASH_BITS, MIN_CATEGORIES, NGRAMS, NORM, PATHS,
                      VAR_SMOOTHING, columns, env, model_options)


@app.command()
def serve(
    bootstrap: str = typer.Option(..., "--bootstrap", envvar=env("BOOTSTRAP"), help="Kafka bootstrap HOST:PORT."),
    input_topic: str = typer.Option(..., "--input", envvar=env("INPUT"), help="Topic of examples (JSON)."),
    output_topic: str = typer.Option(..., "--output", envvar=env("OUTPUT"), help="Topic for predictions."),
    group: str = typer.Option(..., "--group", envvar=env("GROUP"), help="Consumer group id."),
    snapshot_dir: Path = typer.Option(..., "--snapshot-dir", envvar=env("SNAPSHOT_DIR"),
                                      help="Folder of snapshots: the service's state."),
    model: str = typer.Option("multinomial", "--model", envvar=env("MODEL"),
                              help="bernoulli, multinomial, complement, gaussian or categorical."),
    text: bool = typer.Option(False, "--text", envvar=env("TEXT"),
                              help="Messages carry text (in --text-field), hashed into features."),
    feature_names: Optional[str] = typer.Option(None, "--feature-names", envvar=env("FEATURE_NAMES"),
                                                help="Keys of a features object, comma-separated "
                                                     "(default: features is a list of numbers)."),
    hash_bits: int = HASH_BITS,
    ngrams: int = NGRAMS,
    alpha: Optional[float] = ALPHA,
    binarize: Optional[float] = BINARIZE,
    fit_prior: Optional[bool] = FIT_PRIOR,
    norm: Optional[bool] = NORM,
    var_smoothing: Optional[float] = VAR_SMOOTHING,
    min_categories: Optional[int] = MIN_CATEGORIES,
    half_life: Optional[float] = HALF_LIFE,
    classes: Optional[str] = typer.Option(None, "--classes", envvar=env("CLASSES"),
                                          help="Fixed class set, comma-separated; other labels go to the "
                                               "dead-letter topic (default: open, grows)."),
    checkpoint_every: int = typer.Option(10_000, "--checkpoint-every", min=1, envvar=env("CHECKPOINT_EVERY"),
                                         help="Checkpoint after this many messages..."),
    checkpoint_interval: float = typer.Option(30.0, "--checkpoint-interval", min=0.1,
                                              envvar=env("CHECKPOINT_INTERVAL"), help="...or seconds."),
    start: str = typer.Option("earliest", "--start", envvar=env("START"),
                              help="Where a partition without saved state starts: earliest or latest."),
    dead_letter_topic: Optional[str] = typer.Option(None, "--dlq", envvar=env("DLQ"),
                                                    help="Dead-letter topic (default: INPUT.dlq)."),
    keep_snapshots: int = typer.Option(3, "--keep-snapshots", min=1, envvar=env("KEEP_SNAPSHOTS")),
    metrics_port: Optional[int] = typer.Option(None, "--metrics-port", envvar=env("METRICS_PORT"),
                                               help="Serve /metrics, /healthz, /readyz on this port."),
    metrics_host: str = typer.Option("127.0.0.1", "--metrics-host", envvar=env("METRICS_HOST")),
    max_message_bytes: int = typer.Option(1_048_576, "--max-message-bytes", min=1, envvar=env("MAX_MESSAGE_BYTES"),
                                          help="Larger messages go to the dead-letter topic."),
    instance_id: Optional[str] = typer.Option(None, "--instance-id", envvar=env("INSTANCE_ID"),
                                              help="Stable id of this worker in the group (static membership): "
                                                   "a restart takes its partitions back at once."),
    session_timeout: float = typer.Option(10.0, "--session-timeout", min=6, envvar=env("SESSION_TIMEOUT"),
                                          help="Seconds before the group gives a silent worker's partitions away."),
    id_field: str = typer.Option("id", "--id-field", envvar=env("ID_FIELD")),
    features_field: str = typer.Option("features", "--features-field", envvar=env("FEATURES_FIELD")),
    text_field: str = typer.Option("text", "--text-field", envvar=env("TEXT_FIELD")),
    label_field: str = typer.Option("label", "--label-field", envvar=env("LABEL_FIELD")),
    json_logs: bool = typer.Option(False, "--json-logs", envvar=env("JSON_LOGS"), help="Log lines as JSON."),
) -> None:
    """Serve predictions for a Kafka topic and learn from its labeled messages (prequential).

    Every message gets a prediction on --output; labeled ones are then learned from. State is
    checkpointed (producer flushed, snapshot with offsets written, offsets committed) every
    --checkpoint-every messages or --checkpoint-interval seconds and at SIGTERM/SIGINT.
    """
    from ..service.logs import configure_logging
    from ..service.serve import serve as run_serve

    configure_logging(json_logs)
    config = ServeConfig(
        bootstrap=bootstrap, input=input_topic, output=output_topic, group=group, snapshot_dir=snapshot_dir,
        model=model_options(model, alpha, binarize, fit_prior, norm, var_smoothing, min_categories, half_life),
        fields=MessageFields(id=id_field, features=features_field, text=text_field, label=label_field,
                             feature_names=columns(feature_names), max_bytes=max_message_bytes),
        text=text, hash_bits=hash_bits, ngrams=ngrams,
        classes=columns(classes), dead_letter_topic=dead_letter_topic, checkpoint_every=checkpoint_every,
        checkpoint_interval=checkpoint_interval, start=start, keep_snapshots=keep_snapshots,
        metrics_port=metrics_port, metrics_host=metrics_host,
        instance_id=instance_id, session_timeout=session_timeout)
    with reported_errors():
        if start not in ("earliest", "latest"):
            raise ConfigError(f"--start must be earliest or latest; got {start!r}.")
        run_serve(config)


@app.command()
def produce(
    paths: list[str] = PATHS,
    bootstrap: str = typer.Option(..., "--bootstrap", envvar=env("BOOTSTRAP"), help="Kafka bootstrap HOST:PORT."),
    topic: str = typer.Option(..., "--topic", envvar=env("TOPIC"), help="Topic to write to."),
    features: Optional[str] = typer.Option(None, "--features", help="A list column, sent as \"features\"."),
    text: Optional[str] = typer.Option(None, "--text", help="A string column, sent as \"text\"."),
    label: Optional[str] = typer.Option(None, "--label", help="Label column, sent as \"label\"."),
    id_column: Optional[str] = typer.Option(None, "--id", help="Id column, sent as \"id\" and used as the key."),
    rate: float = typer.Option(0.0, "--rate", min=0, help="Messages per second (0: as fast as possible)."),
    limit: Optional[int] = typer.Option(None, "--limit", min=1, help="Stop after this many messages."),
) -> None:
    """Send Parquet rows to a topic as JSON messages (for demos and benchmarks)."""
    from ..service.produce import produce as run_produce

    with reported_errors():
        sent = run_produce(paths, bootstrap, topic, features=features, text=text, label=label,
                           id_column=id_column, rate=rate, limit=limit)
    typer.echo(f"sent {sent:,} messages to {topic}")
