"""Protobuf records (`--format protobuf`) to examples: the message after the frame and its message
indexes, read by a file built at run time from a base64 descriptor or .proto text (bulk and one by
one), each problem named, on a fake registry; and Parquet rows written as such records (the real
registry is in tests/integration/test_protobuf_serve.py)."""

from __future__ import annotations

import base64

import numpy as np
import pyarrow as pa
import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, wrappers_pb2

from nbstream.arrow import FeatureSpec
from worker.errors import ConfigError
from worker.io.fields import LABEL_COLUMN, MessageFields
from worker.io.formats import message_format
from worker.io.kafka.dead_letters import reason_of
from worker.io.messages import decode
from worker.io.registry.client import RegisteredSchema
from worker.io.registry.protobuf import ProtobufDecoder, message_indexes, parse_protobuf, record_of
from worker.io.registry.protobuf_writer import ProtobufWriter, protobuf_file
from worker.io.registry.records import registry_records
from worker.io.registry.schemas import SchemaProblem
from worker.io.registry.wire import frame

from .test_records import FakeRegistry

PROTOBUF = MessageFields(format="protobuf")
F = descriptor_pb2.FieldDescriptorProto
EXAMPLE_PROTO = """
syntax = "proto3";
package test;
import "google/protobuf/wrappers.proto";
message Example {
  int64 id = 1;
  google.protobuf.StringValue label = 2;
  repeated int32 features = 3;
  string text = 4;
  enum Source { UNKNOWN = 0; SCANNER = 1; }
  Source source = 5;
  message Inner { double weight = 1; }
  Inner inner = 6;
}
message Other { optional string label = 1; repeated double features = 2; bytes id = 3; }
"""


def example_file() -> descriptor_pb2.FileDescriptorProto:
    """EXAMPLE_PROTO's Example and Other, built field by field (as a generated module holds them)."""
    file = descriptor_pb2.FileDescriptorProto(name="example.proto", package="test", syntax="proto3",
                                              dependency=["google/protobuf/wrappers.proto"])
    example = file.message_type.add(name="Example")
    example.field.add(name="id", number=1, type=F.TYPE_INT64, label=F.LABEL_OPTIONAL)
    example.field.add(name="label", number=2, type=F.TYPE_MESSAGE, type_name=".google.protobuf.StringValue",
                      label=F.LABEL_OPTIONAL)
    example.field.add(name="features", number=3, type=F.TYPE_INT32, label=F.LABEL_REPEATED)
    example.field.add(name="text", number=4, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    example.enum_type.add(name="Source").value.add(name="UNKNOWN", number=0)
    example.enum_type[0].value.add(name="SCANNER", number=1)
    example.field.add(name="source", number=5, type=F.TYPE_ENUM, type_name=".test.Example.Source",
                      label=F.LABEL_OPTIONAL)
    example.nested_type.add(name="Inner").field.add(name="weight", number=1, type=F.TYPE_DOUBLE,
                                                    label=F.LABEL_OPTIONAL)
    example.field.add(name="inner", number=6, type=F.TYPE_MESSAGE, type_name=".test.Example.Inner",
                      label=F.LABEL_OPTIONAL)
    other = file.message_type.add(name="Other")
    other.field.add(name="label", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL, proto3_optional=True,
                    oneof_index=0)
    other.oneof_decl.add(name="_label")
    other.field.add(name="features", number=2, type=F.TYPE_DOUBLE, label=F.LABEL_REPEATED)
    other.field.add(name="id", number=3, type=F.TYPE_BYTES, label=F.LABEL_OPTIONAL)
    return file


def classes():
    pool = descriptor_pool.DescriptorPool()
    pool.AddSerializedFile(wrappers_pb2.DESCRIPTOR.serialized_pb)
    pool.Add(example_file())
    return tuple(message_factory.GetMessageClass(pool.FindMessageTypeByName(f"test.{name}"))
                 for name in ("Example", "Other", "Example.Inner"))


Example, Other, Inner = classes()
BASE64 = base64.b64encode(example_file().SerializeToString()).decode()


def registry(**more) -> FakeRegistry:
    """Schema 1 the base64 descriptor, 2 the same as .proto text, and ``more`` (id<N>=RegisteredSchema)."""
    return FakeRegistry({1: RegisteredSchema(1, BASE64, "PROTOBUF"), 2: RegisteredSchema(2, EXAMPLE_PROTO, "PROTOBUF"),
                         **{int(name[2:]): schema for name, schema in more.items()}})


def record(message, schema_id: int = 1, indexes: bytes = b"\x00") -> bytes:
    return frame(schema_id, indexes + message.SerializeToString())


def decoded(values: list, spec: FeatureSpec, fake: FakeRegistry | None = None):
    return message_format(PROTOBUF, registry_records(PROTOBUF, fake or registry())).decode(values, spec, None)


def test_message_indexes_are_zigzag_varints_and_a_lone_zero_is_the_first_message():
    assert message_indexes(b"\x00rest") == ((0,), 1)
    assert message_indexes(b"\x02\x02rest") == ((1,), 2)  # count 1, index 1
    assert message_indexes(b"\x04\x00\x00") == ((0, 0), 3)
    assert message_indexes(b"\x04\x02") == "its message indexes run past its end"
    assert message_indexes(b"\x01") == "its message indexes are not a count of zigzag varints"  # count -1


@pytest.mark.parametrize("schema_id", [1, 2])
def test_records_are_the_examples_their_json_objects_would_be_whichever_form_the_schema_has(schema_id):
    rng = np.random.default_rng(5)
    rows = rng.integers(0, 256, (6, 5))
    messages = [Example(id=i, features=row.tolist(), **({"label": {"value": "ab"[i % 2]}} if i % 3 else {}))
                for i, row in enumerate(rows)]
    plain = [{"id": i, "features": row.tolist(), "label": "ab"[i % 2] if i % 3 else None}
             for i, row in enumerate(rows)]
    got = decoded([record(m, schema_id) for m in messages], FeatureSpec.vector("features"))
    expected = decode([str(p).replace("'", '"').replace("None", "null").encode() for p in plain],
                      FeatureSpec.vector("features"), MessageFields())
    assert got.batch.equals(expected.batch) and got.ids == list(range(6))
    assert not got.problems.any()


def test_the_bulk_path_and_the_one_by_one_path_read_the_same_rows():
    messages = [record(Example(id=i, features=[i, 5], label={"value": "x"})) for i in range(3)]
    second = [record(Other(features=[i, 0.5], label="x", id=b"raw"), indexes=b"\x02\x02") for i in range(3)]
    records = registry_records(PROTOBUF, registry())
    fast = records.vectors(messages, PROTOBUF)
    assert fast is not None and fast.labels == ["x"] * 3 and fast.ids == [0, 1, 2]
    np.testing.assert_array_equal(fast.values, [0, 5, 1, 5, 2, 5])
    read, problems = records.read(messages, FeatureSpec.vector("features"), PROTOBUF)
    assert problems == [None] * 3 and [r["features"] for r in read] == [[0, 5], [1, 5], [2, 5]]
    assert records.vectors(second, PROTOBUF) is None  # a bytes id: read one by one, and named there
    read, problems = records.read(second, FeatureSpec.vector("features"), PROTOBUF)
    assert problems == ["field 'id' must be a string or a number"] * 3
    unlabeled = records.vectors([record(Example(features=[i, 0])) for i in range(3)], PROTOBUF)
    assert unlabeled is not None and unlabeled.labels == [None] * 3 and unlabeled.ids == [0] * 3


def test_a_record_reads_wrappers_enums_inner_messages_and_optional_fields_by_name():
    decoder = ProtobufDecoder(PROTOBUF)
    schema = decoder.parse(RegisteredSchema(1, BASE64, "PROTOBUF"))
    message = Example(id=7, label={"value": "cat"}, features=[1, 2], source=1, inner=Inner(weight=0.25))
    got, problem = decoder.read(schema, b"\x00" + message.SerializeToString())
    assert problem is None and got == {"id": 7, "label": "cat", "features": [1, 2], "text": ""}  # what is used
    assert record_of(message) == {"id": 7, "label": "cat", "features": [1, 2], "text": "", "source": "SCANNER",
                                  "inner": {"weight": 0.25}}
    unset, _ = decoder.read(schema, b"\x02\x02" + Other().SerializeToString())
    assert unset == {"label": None, "features": [], "id": b""}
    assert schema.field_names == {"id", "label", "features", "text", "source", "inner", "weight"}


def test_text_features_come_from_a_string_field():
    got = decoded([record(Example(id=1, text="win prizes now", label={"value": "spam"}))], FeatureSpec.text("text", 8))
    assert not got.problems.any() and got.batch.column(LABEL_COLUMN).to_pylist() == ["spam"]


WRONG_TYPE = RegisteredSchema(3, '{"type": "string"}', "AVRO")
REFERS = RegisteredSchema(4, BASE64, "PROTOBUF", ("other.proto",))
NOT_PROTO = RegisteredSchema(5, "syntax = \"proto3\";\nmessage Broken { int64 id = ; }\n", "PROTOBUF")
NO_MESSAGE = RegisteredSchema(6, 'syntax = "proto3";\npackage empty;\n', "PROTOBUF")
NO_FEATURES = RegisteredSchema(7, 'syntax = "proto3";\nmessage Only { int64 id = 1; }\n', "PROTOBUF")
IMPORTS = RegisteredSchema(8, 'syntax = "proto3";\nimport "mine.proto";\nmessage M { int64 id = 1; }\n', "PROTOBUF")


@pytest.mark.parametrize("value, error, reason", [
    (b'{"id": 1, "features": [1]}', "not in the Confluent wire format", "not_wire_format"),
    (frame(9, b"\x00"), "unknown schema id 9", "unknown_schema"),
    (frame(3, b"\x00"), "schema 3 is a AVRO schema; --format protobuf reads Protobuf schemas", "schema"),
    (frame(4, b"\x00"), "schema 4 refers to other schemas (other.proto)", "schema"),
    (frame(5, b"\x00"), "schema 5 is not a valid Protobuf file: schema.proto:2:", "schema"),
    (frame(6, b"\x00"), "schema 6 has no message", "schema"),
    (frame(7, b"\x00"), "schema 7 has no field 'features'", "schema"),
    (frame(8, b"\x00"), "schema 8 is not a valid Protobuf file: ", "schema"),
    (frame(1, b"\x00\xff\xff"), "record does not decode with its schema 1: Error parsing message", "undecodable"),
    (frame(1, b""), "record does not decode with its schema 1: its message indexes are not", "undecodable"),
    (frame(1, b"\x02\x08"), "record does not decode with its schema 1: message indexes [4] name no message",
     "undecodable"),
    (frame(1, b"\x00\x1a\x05\x01"), "record does not decode with its schema 1: Error parsing message", "undecodable"),
])
def test_each_bad_record_alone_is_one_problem_with_its_reason(value, error, reason):
    fake = registry(id3=WRONG_TYPE, id4=REFERS, id5=NOT_PROTO, id6=NO_MESSAGE, id7=NO_FEATURES, id8=IMPORTS)
    got = decoded([value], FeatureSpec.vector("features"), fake)
    (row, _, message), = list(got.problems)
    assert row == 0 and message.startswith(error), message
    assert reason_of(message) == reason


def test_a_bad_record_among_good_ones_is_the_only_problem_and_the_others_are_read():
    values = [record(Example(id=1, features=[1, 2], label={"value": "a"})), frame(1, b"\x00\xff"),
              record(Example(id=3, features=[3, 4], label={"value": "b"}))]
    got = decoded(values, FeatureSpec.vector("features"))
    assert [row for row, _, _ in got.problems] == [1]
    assert got.batch.column(LABEL_COLUMN).to_pylist() == ["a", None, "b"]


def test_each_schema_is_fetched_and_compiled_once():
    fake = registry()
    fmt = message_format(PROTOBUF, registry_records(PROTOBUF, fake))
    for _ in range(3):
        fmt.decode([record(Example(id=1, features=[1]), schema_id=2)] * 4, FeatureSpec.vector("features"), None)
    assert fake.fetched == [2]


def test_parquet_columns_become_a_proto3_message_whose_nulls_read_back_as_none():
    table = pa.table({"features": pa.array([[1, 2], [3, 4]], pa.list_(pa.uint8())), "label": ["a", None],
                      "id": pa.array([10, 2**40], pa.int64()), "weight": pa.array([0.5, 1.5], pa.float32())})
    file = protobuf_file(table.schema)
    kinds = {f.name: (f.type, f.label, f.proto3_optional) for f in file.message_type[0].field}
    assert kinds == {"features": (F.TYPE_UINT32, F.LABEL_REPEATED, False),
                     "label": (F.TYPE_STRING, F.LABEL_OPTIONAL, True),
                     "id": (F.TYPE_INT64, F.LABEL_OPTIONAL, True), "weight": (F.TYPE_FLOAT, F.LABEL_OPTIONAL, True)}
    fake = FakeRegistry({})
    fake.register = lambda subject, text, schema_type: fake.schemas.setdefault(  # type: ignore[attr-defined]
        11, RegisteredSchema(11, text, schema_type)).schema_id
    values = ProtobufWriter.registered(fake, "t-value", table.schema).values(table)
    records, problems = registry_records(PROTOBUF, fake).read(values, FeatureSpec.vector("features"), PROTOBUF)
    assert problems == [None, None]
    assert records == [{"features": [1, 2], "label": "a", "id": 10}, {"features": [3, 4], "label": None, "id": 2**40}]
    message_class = ProtobufWriter.registered(fake, "t-value", table.schema).message_class
    assert [record_of(message_class.FromString(value[6:]))["weight"] for value in values] == [0.5, 1.5]


def test_a_column_of_no_protobuf_type_is_one_line():
    with pytest.raises(ConfigError, match="column 'when' is of Arrow type timestamp"):
        protobuf_file(pa.schema([("when", pa.timestamp("s"))]))


def test_a_schema_problem_is_raised_for_a_schema_of_another_format():
    with pytest.raises(SchemaProblem, match="is a JSON schema"):
        parse_protobuf(RegisteredSchema(1, "{}", "JSON"))


def test_a_schema_id_of_another_format_or_unknown_is_one_line_for_produce():
    fake = registry(id3=WRONG_TYPE)
    with pytest.raises(ConfigError, match="^--schema-id 3 is a AVRO schema, not PROTOBUF"):
        ProtobufWriter.of_id(fake, 3)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="^--schema-id: unknown schema id 9"):
        ProtobufWriter.of_id(fake, 9)  # type: ignore[arg-type]
    assert ProtobufWriter.of_id(fake, 2).message_class.DESCRIPTOR.full_name == "test.Example"  # type: ignore[arg-type]


def test_named_features_come_from_an_inner_message_its_64_bit_integers_as_numbers():
    text = ('syntax = "proto3";\nmessage Person {\n  string id = 1;\n  optional string label = 2;\n'
            '  message F { int64 age = 1; double income = 2; }\n  F features = 3;\n}\n')
    fake = registry(id9=RegisteredSchema(9, text, "PROTOBUF"))
    person = ProtobufDecoder(PROTOBUF).parse(fake.schemas[9]).message_class((0,))
    value = person(id="p-1", label="yes", features={"age": 2**40, "income": 2.5})  # type: ignore[operator]
    got = decoded([record(value, schema_id=9)], FeatureSpec.numeric_columns(["age", "income"]), fake)
    assert not got.problems.any() and got.ids == ["p-1"]
    assert got.batch.column("age").to_pylist() == [2**40] and got.batch.column("income").to_pylist() == [2.5]


def test_message_indexes_that_name_no_message_are_not_remembered():
    schema = ProtobufDecoder(PROTOBUF).parse(RegisteredSchema(1, BASE64, "PROTOBUF"))
    for index in range(2, 500):
        assert isinstance(schema.message_class((index,)), str)
    assert schema.message_class((1,)).DESCRIPTOR.full_name == "test.Other"  # type: ignore[union-attr]
    assert list(schema.classes) == [(1,)]


def test_a_field_the_json_mapping_refuses_is_a_problem_only_where_it_is_used_alone_or_in_a_poll():
    text = ('syntax = "proto3";\nimport "google/protobuf/any.proto";\nimport "google/protobuf/struct.proto";\n'
            'message R { repeated int32 features = 1; google.protobuf.Any extra = 2;\n'
            '  google.protobuf.Value label = 3; }\n')
    fake = registry(id9=RegisteredSchema(9, text, "PROTOBUF"))
    message_class = ProtobufDecoder(PROTOBUF).parse(fake.schemas[9]).message_class((0,))
    unknown_any, nan_label = message_class(features=[1]), message_class(features=[2])  # type: ignore[operator]
    unknown_any.extra.type_url = "type.googleapis.com/no.Such"  # a field no option names: never read
    nan_label.label.number_value = float("nan")
    good = message_class(features=[3], label={"string_value": "a"})  # type: ignore[operator]
    for poll in ([record(unknown_any, 9)], [record(good, 9), record(unknown_any, 9)]):
        got = decoded(poll, FeatureSpec.vector("features"), fake)
        assert not got.problems.any()
    for poll in ([record(nan_label, 9)], [record(good, 9), record(nan_label, 9)]):
        got = decoded(poll, FeatureSpec.vector("features"), fake)
        (row, _, message), = list(got.problems)
        assert row == len(poll) - 1, message
        assert message.startswith("record does not decode with its schema 9: Failed to serialize label field"), message
        assert reason_of(message) == "undecodable"


def test_a_descriptor_nested_past_protobufs_limit_is_a_schema_problem():
    file = descriptor_pb2.FileDescriptorProto(name="deep.proto", syntax="proto3")
    message = file.message_type.add(name="M0")
    for depth in range(1, 2000):
        message = message.nested_type.add(name=f"M{depth}")
    deep = RegisteredSchema(9, base64.b64encode(file.SerializeToString()).decode(), "PROTOBUF")
    with pytest.raises(SchemaProblem, match="^is base64 that does not hold a FileDescriptorProto: .*MaxDepth"):
        parse_protobuf(deep)
