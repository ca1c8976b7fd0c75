"""`worker produce`: load Parquet rows into a topic (for demos and benchmarks).

As JSON, each row becomes {"id": ..., "features": [...] or "text": ..., "label": ...}, keyed by
its id; as Avro, a record with those fields in the Confluent wire format (its schema derived from
the columns and registered under TOPIC-value, or one the registry holds, by id), keyed alike; as
JSON Schema, the JSON object in the wire format, by a JSON Schema derived and registered alike; as
Arrow, every N rows become one IPC stream with those columns.
Every record is confirmed by the broker; the count of those that were not is reported.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import orjson
import pyarrow as pa

from ..errors import ConfigError
from ..io.arrow_messages import write_stream
from ..io.fields import REGISTRY_FORMATS
from ..io.kafka.client import DeliveryFailed, KafkaClient, KafkaFailure, record_bytes
from ..io.parquet.source import count_rows, expand_paths, read_batches
from ..io.registry import require_package
from ..io.registry.client import RegistryClient
from ..io.registry.json_schema_writer import JsonSchemaWriter
from ..io.registry.settings import RegistrySettings
from ..progress import RowProgress
from .labels import DelayedLabels

PRODUCED_FORMATS = ("json", "avro", "json-schema", "protobuf", "arrow")
CONFIRM_EVERY = 10_000  # records between confirmations: bounds what a failure leaves unconfirmed
MIN_RATE = 0.001  # rows per second: a row every 17 minutes; slower rates overflow a sleep


@dataclass
class Produced:
    sent: int  # messages
    failed: int
    error: str | None = None  # the first failure, if any
    rows: int = 0  # examples in the messages sent
    labels: int = 0  # label events sent apart (--labels-topic)


def _topic_limit(client: KafkaClient, topic: str) -> int:
    """The topic's record size limit; the topic is created (one partition) when missing."""
    admin = client.admin()
    try:
        info = admin.topic(topic)
        if info is None:
            admin.create_topic(topic, 1, {})
            info = admin.topic(topic)
        return info.max_message_bytes if info else 1_048_588
    finally:
        admin.close()


def _ready_labels_topic(client: KafkaClient, topic: str, labels_topic: str) -> None:
    """The labels topic, with the topic's partition count: created so when missing, refused otherwise."""
    admin = client.admin()
    try:
        info = admin.topic(topic)
        partitions = info.partitions if info else 1
        labels = admin.topic(labels_topic)
        if labels is None:
            admin.create_topic(labels_topic, partitions, {})
        elif labels.partitions != partitions:
            raise ConfigError(f"the labels topic {labels_topic} has {labels.partitions} partitions and {topic} "
                              f"{partitions}: a label must land in the partition of the same number as its message.")
    finally:
        admin.close()


def produce(client: KafkaClient, paths: list[str], topic: str, *, features: str | None = None,
            text: str | None = None, label: str | None = None, id_column: str | None = None, rate: float = 0.0,
            limit: int | None = None, message_format: str = "json",
            rows_per_message: int = 1000, timeout_s: float = 60.0, progress: bool | None = None,
            registry: RegistrySettings | None = None, schema_id: int | None = None,
            labels_topic: str | None = None, label_delay: int = 0) -> Produced:
    """Send rows as messages; ``rate`` rows/s (0: as fast as possible), at most ``limit`` rows.

    message_format: "json" (one row per message), "avro", "json-schema" or "protobuf" (one
        record per message, in the Confluent wire format: needs ``registry``) or "arrow"
        (``rows_per_message`` rows per message, an Arrow IPC stream with the columns "features" or
        "text", "label", "id").
    schema_id: with a registry format, write by this schema of the registry (default: one
        derived from the columns, registered under TOPIC-value).
    progress: draw a progress bar (None: when stderr is a terminal).
    labels_topic: send each row's label apart, as a label event on this topic, ``label_delay``
        messages after the row's message (``produce_labels``).
    """
    if bool(features) == bool(text):
        raise ConfigError("give exactly one of --features (a list column) or --text (a string column).")
    if message_format not in PRODUCED_FORMATS:
        raise ConfigError(f"--format must be one of {', '.join(PRODUCED_FORMATS)}; got {message_format!r}.")
    if message_format in REGISTRY_FORMATS and registry is None:
        raise ConfigError(f"--format {message_format} needs --schema-registry URL: the registry holds the records' "
                          f"schema.")
    if schema_id is not None and message_format not in REGISTRY_FORMATS:
        raise ConfigError("--schema-id is for --format avro, json-schema or protobuf.")
    if 0 < rate < MIN_RATE:
        raise ConfigError(f"--rate must be 0 (as fast as possible) or at least {MIN_RATE} rows per second; got {rate}.")
    if labels_topic is not None and not (label and id_column and message_format != "arrow"):
        raise ConfigError("--labels-topic needs --label and --id (a label event names its message by id), and "
                          "messages of one row each (not --format arrow).")
    limit_bytes = _topic_limit(client, topic)
    if labels_topic is not None:
        _ready_labels_topic(client, topic, labels_topic)
    producer = client.producer(linger_ms=5, batch_bytes=limit_bytes)
    labels = None if labels_topic is None else DelayedLabels(
        lambda to, value, key: producer.send(to, value, key=key), labels_topic, label_delay)
    names = {features: "features", text: "text", label: "label", id_column: "id"}
    columns = [c for c in (features, text, label, id_column) if c]
    messages = _arrow_messages if message_format == "arrow" else _json_messages
    if message_format in REGISTRY_FORMATS:
        assert registry is not None
        messages = _registry_messages(RegistryClient(registry), message_format, f"{topic}-value", schema_id)
    result, started = Produced(0, 0), time.monotonic()

    def confirm() -> None:
        try:
            producer.flush(timeout_s)
        except DeliveryFailed as failed:
            result.failed += len(failed.failures)
            result.error = result.error or failed.failures[0].error
        except KafkaFailure as failure:
            raise KafkaFailure(f"{failure} ({result.sent:,} sent, the last {CONFIRM_EVERY:,} at most unconfirmed)"
                               ) from None

    files = expand_paths(paths)
    total = count_rows(files) if limit is None else min(limit, count_rows(files))
    try:
        with RowProgress("sending", total, enabled=progress) as bar:
            shown = 0  # rows sent but not yet shown on the bar
            for batch in read_batches(files, columns, CONFIRM_EVERY):
                table = pa.table({names[name]: batch.data.column(name) for name in columns})
                if limit is not None:
                    table = table.slice(0, max(0, limit - result.rows))
                if labels is not None:
                    ids, label_values = table.column("id").to_pylist(), table.column("label").to_pylist()
                    table = table.drop_columns(["label"])
                for row, (rows, key, value) in enumerate(messages(table, rows_per_message)):
                    if rate:
                        delay = started + result.rows / rate - time.monotonic()
                        if delay > 0:
                            time.sleep(delay)
                    result.sent += 1
                    result.rows += rows
                    shown += rows
                    if rate or shown >= 1_000:  # a paced message shows at once; else every thousand rows
                        bar.advance(shown)
                        shown = 0
                    if record_bytes(key, value, []) > limit_bytes:  # the broker would refuse it (and its batch)
                        result.failed += 1
                        result.error = result.error or (f"a message of {len(value):,} bytes exceeds the topic's "
                                                        f"limit of {limit_bytes:,}")
                        continue
                    producer.send(topic, value, key=key)
                    if labels is not None:
                        assert key is not None  # keyed by its id
                        labels.follow(key, ids[row], label_values[row])
                confirm()
                bar.advance(shown)
                shown = 0
                if limit is not None and result.rows >= limit:
                    break
            if labels is not None:
                labels.drain()
                result.labels = labels.sent
            confirm()
        return result
    finally:
        producer.close(timeout_s=5.0)


def _json_messages(table: pa.Table, rows_per_message: int):
    """(1, key, value) per row: a JSON object keyed by its id."""
    data = table.to_pydict()
    ids = data.get("id")
    for i in range(table.num_rows):
        message = {name: values[i] for name, values in data.items()}
        yield 1, None if ids is None else str(ids[i]).encode(), orjson.dumps(message)


def _arrow_messages(table: pa.Table, rows_per_message: int):
    """(rows, None, value) per rows_per_message rows: an Arrow IPC stream."""
    for start in range(0, table.num_rows, rows_per_message):
        part = table.slice(start, rows_per_message)
        yield part.num_rows, None, write_stream(part, compression="lz4")  # 3.4x fewer bytes for MNIST pixels


def _registry_messages(client: RegistryClient, message_format: str, subject: str, schema_id: int | None):
    """A message maker of (1, key, value) per row: a record of ``message_format`` in the wire format,
    keyed by its id, by the schema ``schema_id`` or (None) one derived from the first table's
    columns and registered under ``subject``."""
    require_package(message_format)
    records_writer = writer_class(message_format)
    writers: list = []

    def messages(table: pa.Table, rows_per_message: int):
        if not writers:
            writers.append(records_writer.of_id(client, schema_id) if schema_id is not None else
                           records_writer.registered(client, subject, table.schema))
        ids = table.column("id").to_pylist() if "id" in table.column_names else None
        for i, value in enumerate(writers[0].values(table)):
            yield 1, None if ids is None else str(ids[i]).encode(), value
    return messages


def writer_class(message_format: str):
    """The writer of a registry format's records (imported here: avro and protobuf are optional)."""
    if message_format == "avro":
        from ..io.registry.avro_writer import AvroWriter

        return AvroWriter
    if message_format == "protobuf":
        from ..io.registry.protobuf_writer import ProtobufWriter

        return ProtobufWriter
    return JsonSchemaWriter
