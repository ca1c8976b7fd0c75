"""`worker produce`: load Parquet rows into a topic (for demos and benchmarks).

As JSON, each row becomes {"id": ..., "features": [...] or "text": ..., "label": ...}, keyed by
its id; as Avro, a record with those fields in the Confluent wire format (its schema derived from
the columns and registered under TOPIC-value, or one the registry holds, by id), keyed alike; as
JSON Schema, the JSON object in the wire format, by a JSON Schema derived and registered alike; as
Arrow, every N rows become one IPC stream with those columns.
Every record is confirmed by the broker; the count of those that were not is reported.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol, Self

import orjson
import pyarrow as pa

from ..errors import ConfigError
from ..io.arrow_messages import write_stream
from ..io.fields import REGISTRY_FORMATS
from ..io.kafka.client import KafkaClient
from ..io.parquet.source import count_rows, expand_paths, read_batches
from ..io.registry import require_package
from ..io.registry.client import RegistryClient
from ..io.registry.json_schema_writer import JsonSchemaWriter
from ..io.registry.settings import RegistrySettings
from ..progress import RowProgress
from ..setting import Checked, setting
from .sender import CONFIRM_EVERY, Message, MessageMaker, Produced, Sender

PRODUCED_FORMATS = ("json", "avro", "json-schema", "protobuf", "arrow")
MIN_RATE = 0.001  # rows per second: a row every 17 minutes; slower rates overflow a sleep


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


@dataclass(frozen=True)
class ProduceRequest(Checked):
    """What `worker produce` sends: rows of Parquet files, as messages of a format, to a topic."""
    paths: list[str]
    topic: str = setting(flag="--topic", help="Topic to write to.")
    features: str | None = setting(None, "--features", env="PRODUCE_FEATURES",
                                   help="A list column, sent as \"features\".")
    text: str | None = setting(None, "--text", env="PRODUCE_TEXT", help="A string column, sent as \"text\".")
    label: str | None = setting(None, "--label", env="PRODUCE_LABEL", help="Label column, sent as \"label\".")
    id_column: str | None = setting(None, "--id", env="PRODUCE_ID",
                                    help="Id column, sent as \"id\" and used as the key.")
    rate: float = setting(0.0, "--rate", low=0, help="Rows per second (0: as fast as possible; else at least 0.001).")
    limit: int | None = setting(None, "--limit", low=1, help="Stop after this many rows.")
    message_format: str = setting("json", "--format", env="PRODUCE_FORMAT", choices=PRODUCED_FORMATS,
                                  help="json: one row per message; avro, json-schema, protobuf: one Avro record, JSON "
                                       "object or Protobuf message per message in the Confluent wire format, its "
                                       "schema registered under TOPIC-value (needs --schema-registry); arrow: an "
                                       "Arrow IPC stream of --rows-per-message rows per message.")
    schema_id: int | None = setting(None, "--schema-id", low=0, high=2**32 - 1, panel="Schema Registry",
                                    help="avro, json-schema, protobuf: write by this schema of the registry "
                                         "(protobuf: its first message; default: one derived from the columns, "
                                         "registered under TOPIC-value).")
    rows_per_message: int = setting(1000, "--rows-per-message", low=1, help="Rows per Arrow message.")
    labels_topic: str | None = setting(None, "--labels-topic", env="PRODUCE_LABELS_TOPIC",
                                       help="Send each row's label apart, as {\"id\", \"label\"} on this topic keyed "
                                            "by the id (for worker serve --labels-topic); the messages go without "
                                            "it. Needs --label and --id.")
    label_delay: int = setting(0, "--label-delay", low=0,
                               help="With --labels-topic: messages sent between a row's message and its label.")

    def __post_init__(self) -> None:
        super().__post_init__()
        if bool(self.features) == bool(self.text):
            raise ConfigError("give exactly one of --features (a list column) or --text (a string column).")
        if self.schema_id is not None and self.message_format not in REGISTRY_FORMATS:
            raise ConfigError("--schema-id is for --format avro, json-schema or protobuf.")
        if 0 < self.rate < MIN_RATE:
            raise ConfigError(f"--rate must be 0 (as fast as possible) or at least {MIN_RATE} rows per second; got "
                              f"{self.rate}.")
        if self.labels_topic is not None and not (self.label and self.id_column and self.message_format != "arrow"):
            raise ConfigError("--labels-topic needs --label and --id (a label event names its message by id), and "
                              "messages of one row each (not --format arrow).")

    @property
    def columns(self) -> dict[str, str]:
        """The columns read, each with the field it is sent as."""
        named = {self.features: "features", self.text: "text", self.label: "label", self.id_column: "id"}
        return {column: field for column, field in named.items() if column}


def produce(client: KafkaClient, request: ProduceRequest, *, registry: RegistrySettings | None = None,
            progress: bool | None = None, timeout_s: float = 60.0) -> Produced:
    """Send the rows ``request`` names, every one confirmed; ``registry`` holds the schemas of a
    registry format's records; ``progress`` draws a progress bar (None: when stderr is a terminal)."""
    if request.message_format in REGISTRY_FORMATS and registry is None:
        raise ConfigError(f"--format {request.message_format} needs --schema-registry URL: the registry holds the "
                          "records' schema.")
    limit_bytes = _topic_limit(client, request.topic)
    if request.labels_topic is not None:
        _ready_labels_topic(client, request.topic, request.labels_topic)
    messages = _message_maker(request, registry)
    files = expand_paths(request.paths)
    total = count_rows(files) if request.limit is None else min(request.limit, count_rows(files))
    sender = Sender(client.producer(linger_ms=5, batch_bytes=limit_bytes), request, limit_bytes, timeout_s)
    try:
        with RowProgress("sending", total, enabled=progress) as bar:
            for batch in read_batches(files, list(request.columns), CONFIRM_EVERY):
                table = pa.table({field: batch.data.column(column) for column, field in request.columns.items()})
                if request.limit is not None:
                    table = table.slice(0, max(0, request.limit - sender.rows))
                sender.send_table(table, messages, bar)
                if request.limit is not None and sender.rows >= request.limit:
                    break
            return sender.finish()
    finally:
        sender.close()


def _message_maker(request: ProduceRequest, registry: RegistrySettings | None) -> MessageMaker:
    if request.message_format in REGISTRY_FORMATS:
        assert registry is not None
        return _registry_messages(RegistryClient(registry), request.message_format, f"{request.topic}-value",
                                  request.schema_id)
    return _arrow_messages if request.message_format == "arrow" else _json_messages


def _json_messages(table: pa.Table, rows_per_message: int) -> Iterator[Message]:
    """(1, key, value) per row: a JSON object keyed by its id."""
    data = table.to_pydict()
    ids = data.get("id")
    for i in range(table.num_rows):
        message = {name: values[i] for name, values in data.items()}
        yield 1, None if ids is None else str(ids[i]).encode(), orjson.dumps(message)


def _arrow_messages(table: pa.Table, rows_per_message: int) -> Iterator[Message]:
    """(rows, None, value) per rows_per_message rows: an Arrow IPC stream."""
    for start in range(0, table.num_rows, rows_per_message):
        part = table.slice(start, rows_per_message)
        yield part.num_rows, None, write_stream(part, compression="lz4")  # far fewer bytes for pixel rows


def _registry_messages(client: RegistryClient, message_format: str, subject: str,
                       schema_id: int | None) -> MessageMaker:
    """A message maker of (1, key, value) per row: a record of ``message_format`` in the wire format,
    keyed by its id, by the schema ``schema_id`` or (None) one derived from the first table's
    columns and registered under ``subject``."""
    require_package(message_format)
    records_writer = writer_class(message_format)
    writers: list[RecordsWriter] = []

    def messages(table: pa.Table, rows_per_message: int) -> Iterator[Message]:
        if not writers:
            writers.append(records_writer.of_id(client, schema_id) if schema_id is not None else
                           records_writer.registered(client, subject, table.schema))
        ids = table.column("id").to_pylist() if "id" in table.column_names else None
        for i, value in enumerate(writers[0].values(table)):
            yield 1, None if ids is None else str(ids[i]).encode(), value
    return messages


class RecordsWriter(Protocol):
    """Rows to framed records of a registry format: AvroWriter, JsonSchemaWriter, ProtobufWriter."""

    @classmethod
    def registered(cls, client: RegistryClient, subject: str, columns: pa.Schema) -> Self: ...

    @classmethod
    def of_id(cls, client: RegistryClient, schema_id: int) -> Self: ...

    def values(self, table: pa.Table) -> list[bytes]: ...


def writer_class(message_format: str) -> type[RecordsWriter]:
    """The writer of a registry format's records (imported here: avro and protobuf are optional)."""
    if message_format == "avro":
        from ..io.registry.avro_writer import AvroWriter

        return AvroWriter
    if message_format == "protobuf":
        from ..io.registry.protobuf_writer import ProtobufWriter

        return ProtobufWriter
    return JsonSchemaWriter
