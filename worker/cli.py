"""The ``worker`` command line: thin commands that build a config and delegate.

Every option can also come from an environment variable NBSTREAM_<OPTION> (shown in --help).
Errors about the data or the settings print one line and exit with status 2.
"""

from __future__ import annotations

import json
from contextlib import contextmanager
from pathlib import Path
from typing import Optional

import typer

import nbstream
from nbstream.features import FeatureError, FeatureSpec
from nbstream.snapshot import FORMAT_VERSION, load_with_header

from .config import ConfigError, FeatureOptions, ModelOptions, ScoreConfig, ServeConfig, TrainConfig
from .sources.parquet import SourceError

app = typer.Typer(help="nbstream worker: streaming Naive Bayes over Parquet files and Kafka topics.",
                  no_args_is_help=True, add_completion=False, pretty_exceptions_show_locals=False)

USER_ERRORS = (ConfigError, FeatureError, SourceError, nbstream.SnapshotError, ValueError, TypeError)


def _env(name: str) -> str:
    return f"NBSTREAM_{name}"


def _columns(value: Optional[str]) -> list[str]:
    return [c.strip() for c in value.split(",") if c.strip()] if value else []


@contextmanager
def _reported_errors():
    """Errors about the data or the settings: one line on stderr, exit status 2."""
    try:
        yield
    except USER_ERRORS as error:
        typer.echo(f"error: {error}", err=True)
        raise typer.Exit(code=2) from None


SNAPSHOT = typer.Argument(..., help="Snapshot written by worker train.", show_default=False)
PATHS = typer.Argument(..., help="Parquet files, directories or globs.", show_default=False)
BATCH_SIZE = typer.Option(65_536, "--batch-size", min=1, envvar=_env("BATCH_SIZE"),
                          help="Rows per record batch; bounds memory.")
SKIP_INVALID = typer.Option(False, "--skip-invalid", envvar=_env("SKIP_INVALID"),
                            help="Set bad rows aside (counted, written out) instead of stopping.")
PROGRESS = typer.Option(None, "--progress/--no-progress", envvar=_env("PROGRESS"),
                        help="Progress bar with rows/s (default: on when stderr is a terminal).")

HASH_BITS = typer.Option(20, "--hash-bits", min=1, max=31, envvar=_env("HASH_BITS"),
                         help="Text is hashed into 2**hash_bits features.")
NGRAMS = typer.Option(1, "--ngrams", min=1, max=5, envvar=_env("NGRAMS"), help="Use word n-grams up to this length.")
ALPHA = typer.Option(None, "--alpha", min=0, envvar=_env("ALPHA"), help="Additive smoothing (default: 1.0).")
BINARIZE = typer.Option(None, "--binarize", envvar=_env("BINARIZE"),
                        help="Bernoulli: features > this become 1 (default: 0.0).")
FIT_PRIOR = typer.Option(None, "--fit-prior/--uniform-prior", envvar=_env("FIT_PRIOR"),
                         help="Learn class priors, or use uniform ones (default: learn).")
NORM = typer.Option(None, "--norm/--no-norm", envvar=_env("NORM"),
                    help="Complement: normalise the weights (default: no).")
VAR_SMOOTHING = typer.Option(None, "--var-smoothing", min=0, envvar=_env("VAR_SMOOTHING"),
                             help="Gaussian: variance smoothing (default: 1e-9).")
MIN_CATEGORIES = typer.Option(None, "--min-categories", min=1, envvar=_env("MIN_CATEGORIES"),
                              help="Categorical: minimum categories per feature.")
HALF_LIFE = typer.Option(None, "--half-life", min=0, envvar=_env("HALF_LIFE"),
                         help="Forget: an example's weight halves every N newer examples.")


@app.callback()
def _commands() -> None:
    """Train, evaluate and serve streaming Naive Bayes models; see each command's --help."""


@app.command()
def train(
    paths: list[str] = PATHS,
    label: str = typer.Option(..., "--label", envvar=_env("LABEL"), help="Column holding the class label."),
    out: Path = typer.Option(..., "--out", envvar=_env("OUT"), help="Snapshot to write (and to continue from)."),
    model: Optional[str] = typer.Option(None, "--model", envvar=_env("MODEL"),
                                        help="bernoulli, multinomial, complement, gaussian or categorical "
                                             "(default: multinomial)."),
    features: Optional[str] = typer.Option(None, "--features", envvar=_env("FEATURES"),
                                           help="Feature columns, comma-separated: one list column "
                                                "(e.g. pixels), numeric columns, or string columns for "
                                                "--model categorical."),
    text: Optional[str] = typer.Option(None, "--text", envvar=_env("TEXT"),
                                       help="A text column: lowercased word tokens, hashed."),
    hash_bits: int = HASH_BITS,
    ngrams: int = NGRAMS,
    alpha: Optional[float] = ALPHA,
    binarize: Optional[float] = BINARIZE,
    fit_prior: Optional[bool] = FIT_PRIOR,
    norm: Optional[bool] = NORM,
    var_smoothing: Optional[float] = VAR_SMOOTHING,
    min_categories: Optional[int] = MIN_CATEGORIES,
    half_life: Optional[float] = HALF_LIFE,
    checkpoint_every: Optional[int] = typer.Option(None, "--checkpoint-every", min=1,
                                                   envvar=_env("CHECKPOINT_EVERY"),
                                                   help="Write the snapshot every N rows (the run can then "
                                                        "be restarted where it stopped)."),
    resume: Optional[Path] = typer.Option(None, "--resume", envvar=_env("RESUME"),
                                          help="Keep training this snapshot's model on new data."),
    fresh: bool = typer.Option(False, "--fresh", envvar=_env("FRESH"),
                               help="Start over even if --out holds a checkpoint of this run."),
    rejects: Optional[Path] = typer.Option(None, "--rejects", envvar=_env("REJECTS"),
                                           help="Folder for rows set aside by --skip-invalid "
                                                "(default: OUT.rejects)."),
    skip_invalid: bool = SKIP_INVALID,
    batch_size: int = BATCH_SIZE,
    progress: Optional[bool] = PROGRESS,
) -> None:
    """Learn a model from Parquet files in bounded memory and write a snapshot.

    Run again with the same arguments after an interruption to continue from the last checkpoint.
    """
    from .train import train as run_train

    if resume is None and model is None:
        model = "multinomial"
    config = TrainConfig(
        paths=paths, label=label, out=out,
        model=ModelOptions(kind=model, alpha=alpha, binarize=binarize, fit_prior=fit_prior, norm=norm,
                           var_smoothing=var_smoothing, min_categories=min_categories, half_life=half_life),
        features=FeatureOptions(columns=_columns(features), text=text, hash_bits=hash_bits, ngrams=ngrams),
        batch_size=batch_size, checkpoint_every=checkpoint_every, resume=resume, fresh=fresh,
        skip_invalid=skip_invalid, rejects=rejects)
    with _reported_errors():
        summary = run_train(config, progress=progress)
    rate = summary.rows_read / summary.seconds if summary.seconds > 0 else 0.0
    if summary.resumed_from:
        typer.echo(f"continued from file {summary.resumed_from.file_index}, row {summary.resumed_from.row}")
    typer.echo(f"learned {summary.rows_learned:,} rows ({summary.rows_rejected:,} rejected in all) in "
               f"{summary.seconds:.1f}s, {rate:,.0f} rows/s")
    typer.echo(f"classes: {', '.join(str(c) for c in summary.model.classes_.tolist())}")
    typer.echo(f"snapshot: {summary.snapshot}")
    if summary.rows_rejected:
        typer.echo(f"rejected rows: {config.rejects_dir}")


@app.command()
def predict(
    snapshot: Path = SNAPSHOT,
    paths: list[str] = PATHS,
    out: Path = typer.Option(..., "--out", envvar=_env("PREDICTIONS"), help="Parquet file to write."),
    proba: bool = typer.Option(False, "--proba", envvar=_env("PROBA"),
                               help="Add a proba_<class> column per class."),
    id_column: Optional[str] = typer.Option(None, "--id", envvar=_env("ID"),
                                            help="Column passed through to identify each row."),
    skip_invalid: bool = SKIP_INVALID,
    batch_size: int = BATCH_SIZE,
    progress: Optional[bool] = PROGRESS,
) -> None:
    """Predict a label for every row; one output row per input row."""
    from .scoring import predict as run_predict

    config = ScoreConfig(snapshot=snapshot, paths=paths, batch_size=batch_size, skip_invalid=skip_invalid)
    with _reported_errors():
        rows = run_predict(config, out, proba, id_column, progress=progress)
    typer.echo(f"wrote {rows:,} predictions to {out}")


@app.command()
def evaluate(
    snapshot: Path = SNAPSHOT,
    paths: list[str] = PATHS,
    label: Optional[str] = typer.Option(None, "--label", envvar=_env("LABEL"),
                                        help="Label column (default: the one the model was trained on)."),
    as_json: bool = typer.Option(False, "--json", help="Print the metrics as JSON."),
    skip_invalid: bool = SKIP_INVALID,
    batch_size: int = BATCH_SIZE,
    progress: Optional[bool] = PROGRESS,
) -> None:
    """Accuracy, macro-F1, log-loss, per-class precision/recall and the confusion matrix."""
    from .scoring import evaluate as run_evaluate

    config = ScoreConfig(snapshot=snapshot, paths=paths, batch_size=batch_size, skip_invalid=skip_invalid)
    with _reported_errors():
        report = run_evaluate(config, label, progress=progress)
    if as_json:
        typer.echo(json.dumps(report, indent=2))
        return
    typer.echo(f"rows:      {report['rows']:,}" + (f" ({report['rows_skipped']:,} skipped)"
                                                   if report["rows_skipped"] else ""))
    typer.echo(f"accuracy:  {report['accuracy']:.4f}")
    typer.echo(f"macro-F1:  {report['macro_f1']:.4f}")
    typer.echo(f"log-loss:  {report['log_loss']:.4f}")
    typer.echo(f"{'class':<16}{'precision':>10}{'recall':>10}{'f1':>10}{'support':>10}")
    for row in report["classes"]:
        typer.echo(f"{row['label']!s:<16}{row['precision']:>10.4f}{row['recall']:>10.4f}"
                   f"{row['f1']:>10.4f}{row['support']:>10,}")
    typer.echo("confusion matrix (rows: true, columns: predicted):")
    width = max(6, *(len(str(label)) + 1 for label in report["labels"]))
    typer.echo(" " * width + "".join(f"{label!s:>{width}}" for label in report["labels"]))
    for label, counts in zip(report["labels"], report["confusion_matrix"]):
        typer.echo(f"{label!s:>{width}}" + "".join(f"{c:>{width}}" for c in counts))


@app.command()
def inspect(snapshot: Path = typer.Argument(..., help="Snapshot file.", show_default=False),
            as_json: bool = typer.Option(False, "--json", help="Print the header as JSON.")) -> None:
    """Kind, parameters, classes and counts, examples seen, features, source position, checksum."""
    with _reported_errors():
        model, header = load_with_header(snapshot)
    if as_json:
        typer.echo(json.dumps({key: value for key, value in header.items() if key != "arrays"}, indent=2))
        return
    meta = header["meta"]
    typer.echo(f"kind:           {header['kind']}")
    typer.echo(f"format version: {FORMAT_VERSION} (checksum ok)")
    typer.echo(f"created:        {header['created_at']}")
    typer.echo(f"examples seen:  {header['examples_seen']:,}")
    typer.echo(f"parameters:     {model!r}")
    if "features" in meta:
        typer.echo(f"features:       {FeatureSpec.from_json(meta['features']).describe()}")
        typer.echo(f"label column:   {meta.get('label')}")
    else:
        typer.echo(f"features:       {header['n_features']}")
    source = meta.get("source")
    if isinstance(source, dict) and source.get("type") == "parquet":
        position = source["position"]
        state = "complete" if source["complete"] else f"at file {position['file_index']}, row {position['row']}"
        typer.echo(f"source:         {len(source['files'])} Parquet file(s), {state}")
        typer.echo(f"rows rejected:  {meta.get('rows_rejected', 0):,}")
    elif isinstance(source, dict):
        typer.echo(f"source:         {json.dumps(source)}")
    typer.echo(f"classes ({'open' if header['open_classes'] else 'fixed'}):")
    for label, count in zip(model.classes_.tolist(), model.class_count_.tolist()):
        typer.echo(f"  {label!s:<20} {count:,.6g}")
    extra = {key: value for key, value in meta.items()
             if key not in ("features", "label", "source", "run", "rows_read", "rows_rejected")
             or (key == "source" and not isinstance(value, dict))}
    if extra:
        typer.echo(f"metadata:       {json.dumps(extra)}")


@app.command()
def merge(snapshots: list[Path] = typer.Argument(..., help="Snapshots trained on different shards.",
                                                 show_default=False),
          out: Path = typer.Option(..., "--out", envvar=_env("OUT"), help="Merged snapshot to write.")) -> None:
    """Merge snapshots of the same kind and features into one model (exactly as if trained on all)."""
    from .merge import merge_snapshots

    with _reported_errors():
        model = merge_snapshots(snapshots, out)
    typer.echo(f"merged {len(snapshots)} snapshots: {model.n_examples_seen_:,} examples, "
               f"{len(model.classes_)} classes -> {out}")


@app.command()
def serve(
    bootstrap: str = typer.Option(..., "--bootstrap", envvar=_env("BOOTSTRAP"), help="Kafka bootstrap HOST:PORT."),
    input_topic: str = typer.Option(..., "--input", envvar=_env("INPUT"), help="Topic of examples (JSON)."),
    output_topic: str = typer.Option(..., "--output", envvar=_env("OUTPUT"), help="Topic for predictions."),
    group: str = typer.Option(..., "--group", envvar=_env("GROUP"), help="Consumer group id."),
    snapshot_dir: Path = typer.Option(..., "--snapshot-dir", envvar=_env("SNAPSHOT_DIR"),
                                      help="Folder of snapshots: the service's state."),
    model: str = typer.Option("multinomial", "--model", envvar=_env("MODEL"),
                              help="bernoulli, multinomial, complement, gaussian or categorical."),
    text: bool = typer.Option(False, "--text", envvar=_env("TEXT"),
                              help="Messages carry text (in --text-field), hashed into features."),
    feature_names: Optional[str] = typer.Option(None, "--feature-names", envvar=_env("FEATURE_NAMES"),
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
    classes: Optional[str] = typer.Option(None, "--classes", envvar=_env("CLASSES"),
                                          help="Fixed class set, comma-separated; other labels go to the "
                                               "dead-letter topic (default: open, grows)."),
    checkpoint_every: int = typer.Option(10_000, "--checkpoint-every", min=1, envvar=_env("CHECKPOINT_EVERY"),
                                         help="Checkpoint after this many messages..."),
    checkpoint_interval: float = typer.Option(30.0, "--checkpoint-interval", min=0.1,
                                              envvar=_env("CHECKPOINT_INTERVAL"), help="...or seconds."),
    start: str = typer.Option("earliest", "--start", envvar=_env("START"),
                              help="Where a partition without saved state starts: earliest or latest."),
    dead_letter_topic: Optional[str] = typer.Option(None, "--dlq", envvar=_env("DLQ"),
                                                    help="Dead-letter topic (default: INPUT.dlq)."),
    keep_snapshots: int = typer.Option(3, "--keep-snapshots", min=1, envvar=_env("KEEP_SNAPSHOTS")),
    metrics_port: Optional[int] = typer.Option(None, "--metrics-port", envvar=_env("METRICS_PORT"),
                                               help="Serve /metrics, /healthz, /readyz on this port."),
    metrics_host: str = typer.Option("127.0.0.1", "--metrics-host", envvar=_env("METRICS_HOST")),
    max_message_bytes: int = typer.Option(1_048_576, "--max-message-bytes", min=1, envvar=_env("MAX_MESSAGE_BYTES"),
                                          help="Larger messages go to the dead-letter topic."),
    instance_id: Optional[str] = typer.Option(None, "--instance-id", envvar=_env("INSTANCE_ID"),
                                              help="Stable id of this worker in the group (static membership): "
                                                   "a restart takes its partitions back at once."),
    session_timeout: float = typer.Option(10.0, "--session-timeout", min=6, envvar=_env("SESSION_TIMEOUT"),
                                          help="Seconds before the group gives a silent worker's partitions away."),
    id_field: str = typer.Option("id", "--id-field", envvar=_env("ID_FIELD")),
    features_field: str = typer.Option("features", "--features-field", envvar=_env("FEATURES_FIELD")),
    text_field: str = typer.Option("text", "--text-field", envvar=_env("TEXT_FIELD")),
    label_field: str = typer.Option("label", "--label-field", envvar=_env("LABEL_FIELD")),
    json_logs: bool = typer.Option(False, "--json-logs", envvar=_env("JSON_LOGS"), help="Log lines as JSON."),
) -> None:
    """Serve predictions for a Kafka topic and learn from its labeled messages (prequential).

    Every message gets a prediction on --output; labeled ones are then learned from. State is
    checkpointed (producer flushed, snapshot with offsets written, offsets committed) every
    --checkpoint-every messages or --checkpoint-interval seconds and at SIGTERM/SIGINT.
    """
    from .logs import configure_logging
    from .serve import serve as run_serve

    configure_logging(json_logs)
    config = ServeConfig(
        bootstrap=bootstrap, input=input_topic, output=output_topic, group=group, snapshot_dir=snapshot_dir,
        model=ModelOptions(kind=model, alpha=alpha, binarize=binarize, fit_prior=fit_prior, norm=norm,
                           var_smoothing=var_smoothing, min_categories=min_categories, half_life=half_life),
        text=text, feature_names=_columns(feature_names), hash_bits=hash_bits, ngrams=ngrams,
        classes=_columns(classes), dead_letter_topic=dead_letter_topic, checkpoint_every=checkpoint_every,
        checkpoint_interval=checkpoint_interval, start=start, keep_snapshots=keep_snapshots,
        metrics_port=metrics_port, metrics_host=metrics_host, max_message_bytes=max_message_bytes,
        instance_id=instance_id, session_timeout=session_timeout,
        id_field=id_field, features_field=features_field, text_field=text_field, label_field=label_field)
    with _reported_errors():
        if start not in ("earliest", "latest"):
            raise ConfigError(f"--start must be earliest or latest; got {start!r}.")
        run_serve(config)


@app.command()
def produce(
    paths: list[str] = PATHS,
    bootstrap: str = typer.Option(..., "--bootstrap", envvar=_env("BOOTSTRAP"), help="Kafka bootstrap HOST:PORT."),
    topic: str = typer.Option(..., "--topic", envvar=_env("TOPIC"), help="Topic to write to."),
    features: Optional[str] = typer.Option(None, "--features", help="A list column, sent as \"features\"."),
    text: Optional[str] = typer.Option(None, "--text", help="A string column, sent as \"text\"."),
    label: Optional[str] = typer.Option(None, "--label", help="Label column, sent as \"label\"."),
    id_column: Optional[str] = typer.Option(None, "--id", help="Id column, sent as \"id\" and used as the key."),
    rate: float = typer.Option(0.0, "--rate", min=0, help="Messages per second (0: as fast as possible)."),
    limit: Optional[int] = typer.Option(None, "--limit", min=1, help="Stop after this many messages."),
) -> None:
    """Send Parquet rows to a topic as JSON messages (for demos and benchmarks)."""
    from .produce import produce as run_produce

    with _reported_errors():
        sent = run_produce(paths, bootstrap, topic, features=features, text=text, label=label,
                           id_column=id_column, rate=rate, limit=limit)
    typer.echo(f"sent {sent:,} messages to {topic}")


def main() -> None:
    app()
