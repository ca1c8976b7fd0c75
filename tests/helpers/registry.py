"""A real Confluent-compatible Schema Registry for the tests, and small helpers around it.

The session's registry comes from NBSTREAM_SCHEMA_REGISTRY_URL, else scripts/schema_registry.py
(Apicurio Registry from Maven Central, Java 17, 127.0.0.1). Tests that pause the registry get one
of their own from the same launcher. In CI (CI set) a registry that cannot start fails the run.

The helpers register and serialize with confluent_kafka's own Schema Registry client and Avro
serializer: an independent client checks what the worker reads and writes.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path

from .kafka import read_all
from .paths import script
from .service import assert_equal_statistics


def local_registry(workdir: Path):
    """A started registry of our own (see scripts/schema_registry.py); ``stop()`` it when done."""
    return script("schema_registry").Registry(Path(workdir)).start()


@contextmanager
def schema_registry(workdir: Path):
    """Yield the URL of the session's registry."""
    configured = os.environ.get("NBSTREAM_SCHEMA_REGISTRY_URL")
    if configured:
        yield configured
        return
    registry = local_registry(workdir)
    try:
        yield registry.url
    finally:
        registry.stop()


def registry_client(url: str):
    """confluent_kafka's client of the registry at ``url``."""
    from confluent_kafka.schema_registry import SchemaRegistryClient

    return SchemaRegistryClient({"url": url})


def set_compatibility(url: str, subject: str, level: str) -> None:
    """A subject's compatibility level (the test registry's default is NONE)."""
    registry_client(url).set_compatibility(subject, level)


def avro_values(url: str, topic: str, schema: dict, records: list[dict]) -> list[bytes]:
    """The records in the Confluent wire format, serialized by confluent_kafka's AvroSerializer,
    which registers the schema under TOPIC-value."""
    import json

    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    serializer = AvroSerializer(registry_client(url), json.dumps(schema))
    context = SerializationContext(topic, MessageField.VALUE)
    return [serializer(record, context) for record in records]


def json_schema_values(url: str, topic: str, schema: dict, records: list[dict]) -> list[bytes]:
    """The records in the Confluent wire format, serialized (and validated) by confluent_kafka's
    JSONSerializer, which registers the schema under TOPIC-value."""
    import json

    from confluent_kafka.schema_registry.json_schema import JSONSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    serializer = JSONSerializer(json.dumps(schema), registry_client(url))
    context = SerializationContext(topic, MessageField.VALUE)
    return [serializer(record, context) for record in records]


def json_schema_records(url: str, values: list[bytes], topic: str = "") -> list[dict]:
    """Wire-format values read back (and validated) by confluent_kafka's JSONDeserializer."""
    from confluent_kafka.schema_registry.json_schema import JSONDeserializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    deserializer = JSONDeserializer(None, schema_registry_client=registry_client(url))
    context = SerializationContext(topic, MessageField.VALUE)
    return [deserializer(value, context) for value in values]


def avro_records(url: str, values: list[bytes], topic: str = "") -> list[dict]:
    """Wire-format values read back by confluent_kafka's AvroDeserializer (each by its writer schema)."""
    from confluent_kafka.schema_registry.avro import AvroDeserializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    deserializer = AvroDeserializer(registry_client(url))
    context = SerializationContext(topic, MessageField.VALUE)
    return [deserializer(value, context) for value in values]


def protobuf_values(url: str, topic: str, messages: list) -> list[bytes]:
    """Protobuf messages in the Confluent wire format, serialized by confluent_kafka's
    ProtobufSerializer, which registers their file (base64, as it does) under TOPIC-value."""
    from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    serializer = ProtobufSerializer(type(messages[0]), registry_client(url), {"use.deprecated.format": False})
    context = SerializationContext(topic, MessageField.VALUE)
    return [serializer(message, context) for message in messages]


def protobuf_records(url: str, values: list[bytes], message_class, topic: str = "") -> list:
    """Wire-format values read back by confluent_kafka's ProtobufDeserializer, as ``message_class``."""
    from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    deserializer = ProtobufDeserializer(message_class, {"use.deprecated.format": False}, registry_client(url))
    context = SerializationContext(topic, MessageField.VALUE)
    return [deserializer(value, context) for value in values]


def by_id(records) -> dict:
    """JSON predictions by their id: (prediction, probabilities)."""
    return {p["id"]: (p["prediction"], p["probabilities"]) for p in (json.loads(r.value) for r in records)}


def assert_served_as_json(bootstrap: str, services: list, X, labels, also: Callable[[], None] = lambda: None) -> None:
    """Start ``services`` (one on plain JSON messages, one on registry records of the same rows): each
    predicts every row, the same predictions by id; ``also`` checks more before they stop; the
    records' service learned exactly the rows (X, labels). The services are killed if still running."""
    try:
        for service in services:
            service.start()
        found = [read_all(bootstrap, s.output, expected=len(X), committed_only=True) for s in services]
        assert [len(f) for f in found] == [len(X)] * 2, services[1].log_tail()
        assert by_id(found[1]) == by_id(found[0])
        also()
        for service in services:
            assert service.terminate() == 0, service.log_tail()
        assert_equal_statistics(services[1].state()[0], X, labels)
    finally:
        for service in services:
            if service.running():
                service.kill()


def produce_rows(bootstrap: str, client: str, data: Path, topic: str, registry_url: str, message_format: str, *extra):
    """`worker produce` of a Parquet file of columns pixels, y, key as records of ``message_format``."""
    from .cli import run_worker

    return run_worker("produce", data, "--bootstrap", bootstrap, "--kafka-client", client, "--topic", topic,
                      "--features", "pixels", "--label", "y", "--id", "key", "--format", message_format,
                      "--schema-registry", registry_url, *extra, timeout=120)
