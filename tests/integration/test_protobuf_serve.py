"""`worker serve --format protobuf` and `worker produce --format protobuf`: Protobuf messages in the
Confluent wire format, written and read back by confluent_kafka's own ProtobufSerializer and
ProtobufDeserializer, with their schemas in a real Schema Registry, as a base64 descriptor (what
that serializer registers) or as .proto text (what most other producers register)."""

from __future__ import annotations

import base64

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from confluent_kafka.schema_registry import Schema
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from tests.helpers.kafka import TopicWatcher, new_topic, read_all, send
from tests.helpers.registry import (
    assert_served_as_json,
    produce_rows,
    protobuf_records,
    protobuf_values,
    registry_client,
)
from tests.helpers.service import Service, assert_equal_statistics, labeled_messages
from worker.io.registry.wire import frame

F = descriptor_pb2.FieldDescriptorProto
# The second version as another producer registers it: .proto text, a field added.
EXAMPLE_V2_PROTO = """syntax = "proto3";
package nbstream.test;
message Example {
  int64 id = 1;
  optional string label = 2;
  repeated int32 features = 3;
  string source = 4;
}
"""


def example_class(*extra: tuple[str, int]):
    """A message class built at run time: Example(id, optional label, repeated int32 features, *extra strings)."""
    file = descriptor_pb2.FileDescriptorProto(name="example.proto", package="nbstream.test", syntax="proto3")
    message = file.message_type.add(name="Example")
    message.field.add(name="id", number=1, type=F.TYPE_INT64, label=F.LABEL_OPTIONAL)
    message.field.add(name="label", number=2, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL, proto3_optional=True,
                      oneof_index=0)
    message.oneof_decl.add(name="_label")
    message.field.add(name="features", number=3, type=F.TYPE_INT32, label=F.LABEL_REPEATED)
    for name, number in extra:
        message.field.add(name=name, number=number, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("nbstream.test.Example"))


Example = example_class()


def examples(message_class, X, labels, start_id=0, **more) -> list:
    return [message_class(id=start_id + i, label=str(label), features=row.tolist(), **more)
            for i, (row, label) in enumerate(zip(X, labels, strict=True))]


def protobuf_service(bootstrap, topic, folder, registry_url, *extra, client, **kwargs) -> Service:
    return Service(bootstrap, topic, folder, "--format", "protobuf", "--schema-registry", registry_url, *extra,
                   client=client, **kwargs)


def test_records_of_confluents_serializer_are_predicted_as_the_same_rows_in_json(
        kafka_bootstrap, schema_registry_url, kafka_client, tmp_path):
    values, X, labels = labeled_messages(400, np.random.default_rng(31))
    json_topic, framed_topic = new_topic(kafka_bootstrap, "pb-json"), new_topic(kafka_bootstrap, "protobuf")
    send(kafka_bootstrap, json_topic, values)
    framed = protobuf_values(schema_registry_url, framed_topic, examples(Example, X, labels))
    send(kafka_bootstrap, framed_topic, framed)
    services = [Service(kafka_bootstrap, json_topic, tmp_path, client=kafka_client, name="json"),
                protobuf_service(kafka_bootstrap, framed_topic, tmp_path, schema_registry_url, client=kafka_client,
                                 name="protobuf")]
    assert_served_as_json(kafka_bootstrap, services, X, labels)


def test_each_bad_record_alone_is_dead_lettered_and_a_new_version_as_proto_text_is_read_without_a_restart(
        kafka_bootstrap, schema_registry_url, kafka_client, tmp_path):
    topic = new_topic(kafka_bootstrap, "protobuf-poison")
    _, X, labels = labeled_messages(40, np.random.default_rng(32))
    first = protobuf_values(schema_registry_url, topic, examples(Example, X[:20], labels[:20]))
    known = int.from_bytes(first[0][1:5], "big")
    client = registry_client(schema_registry_url)
    lacking = client.register_schema(f"{topic}-other", Schema('syntax = "proto3";\nmessage Other { int64 id = 1; }\n',
                                                              "PROTOBUF"))
    poison = [  # (value, the start of the error, its reason)
        (b'{"id": 1, "features": [1]}', "not in the Confluent wire format: the first byte is 0x7b", "not_wire_format"),
        (frame(999_999, first[0][5:]), "unknown schema id 999999", "unknown_schema"),
        (first[0][:-3], f"record does not decode with its schema {known}", "undecodable"),
        (frame(known, b"\x02\x08" + first[0][6:]), f"record does not decode with its schema {known}: message indexes",
         "undecodable"),
        (frame(lacking, b"\x00\x08\x01"), f"schema {lacking} has no field 'features'", "schema"),
    ]
    service = protobuf_service(kafka_bootstrap, topic, tmp_path, schema_registry_url, client=kafka_client).start()
    predictions, dead = TopicWatcher(kafka_bootstrap, service.output), TopicWatcher(kafka_bootstrap, f"{topic}.dlq")
    try:
        send(kafka_bootstrap, topic, first)
        assert predictions.wait_until(lambda records: len(records) == 20), service.log_tail()
        for offset, (value, error, reason) in enumerate(poison, start=20):
            send(kafka_bootstrap, topic, [value], first_key=offset)
            assert dead.wait_until(lambda records, n=offset - 19: len(records) == n, timeout=60), \
                (error, service.log_tail())
            headers = dict(dead.records[-1].headers)
            assert headers["error"].decode().startswith(error), headers["error"]
            assert headers["__connect.errors.exception.class.name"].decode() == f"nbstream.{reason}"
            assert dead.records[-1].value == value and service.running(), service.log_tail()
        version_2 = client.register_schema(f"{topic}-value", Schema(EXAMPLE_V2_PROTO, "PROTOBUF"))
        assert client.get_versions(f"{topic}-value") == [1, 2]
        later = [frame(version_2, b"\x00" + m.SerializeToString()) for m in
                 examples(example_class(("source", 4)), X[20:], labels[20:], start_id=20, source="scanner")]
        send(kafka_bootstrap, topic, later, first_key=20 + len(poison))
        assert predictions.wait_until(lambda records: len(records) == 40), service.log_tail()
        assert service.terminate() == 0, service.log_tail()
        assert_equal_statistics(service.state()[0], X, labels)
        assert len(dead.records) == len(poison)
    finally:
        predictions.close(), dead.close()
        if service.running():
            service.kill()


def test_produced_records_are_read_back_by_confluents_deserializer(kafka_bootstrap, schema_registry_url,
                                                                   kafka_client, tmp_path):
    rows = {"pixels": pa.array([[1, 2, 3], [4, 5, 6]], pa.list_(pa.int32())), "y": ["a", None], "key": [10, 11]}
    data = tmp_path / "rows.parquet"
    pq.write_table(pa.table(rows), data)
    topic = new_topic(kafka_bootstrap, "produced-protobuf")
    result = produce_rows(kafka_bootstrap, kafka_client, data, topic, schema_registry_url, "protobuf")
    assert result.returncode == 0, result.stderr
    values = [r.value for r in read_all(kafka_bootstrap, topic, expected=2)]
    registered = registry_client(schema_registry_url).get_latest_version(f"{topic}-value")
    assert registered.schema.schema_type == "PROTOBUF"
    file = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(registered.schema.schema_str))
    assert [(f.name, f.number, f.proto3_optional) for f in file.message_type[0].field] == [
        ("features", 1, False), ("label", 2, True), ("id", 3, True)]
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    name = f"{file.package}.{file.message_type[0].name}"
    produced = message_factory.GetMessageClass(pool.FindMessageTypeByName(name))
    read = protobuf_records(schema_registry_url, values, produced, topic)
    assert [(m.id, m.HasField("label") and m.label, list(m.features)) for m in read] == [
        (10, "a", [1, 2, 3]), (11, False, [4, 5, 6])]

    again = new_topic(kafka_bootstrap, "produced-protobuf-by-id")
    result = produce_rows(kafka_bootstrap, kafka_client, data, again, schema_registry_url, "protobuf",
                          "--schema-id", registered.schema_id)
    assert result.returncode == 0, result.stderr
    assert [r.value for r in read_all(kafka_bootstrap, again, expected=2)] == values
