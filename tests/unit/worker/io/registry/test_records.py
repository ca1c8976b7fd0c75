"""Records in the Confluent wire format to examples: the frame, the schema cache, the Avro decoder
and each problem's name, on a fake registry (the real one is in tests/integration/test_avro_serve.py)."""

from __future__ import annotations

import io
import json

import fastavro
import numpy as np
import pytest

from nbstream.arrow import FeatureSpec
from worker.io.fields import LABEL_COLUMN, MessageFields
from worker.io.formats import message_format
from worker.io.kafka.dead_letters import reason_of
from worker.io.messages import decode
from worker.io.registry.avro import parse_avro
from worker.io.registry.client import RegisteredSchema, RegistryUnavailable, SchemaNotFound
from worker.io.registry.records import registry_records
from worker.io.registry.schemas import MOST_FETCHES_PER_POLL, MOST_MISSING, SchemaCache
from worker.io.registry.wire import frame, unframe

DIGIT = {"type": "record", "name": "Digit", "fields": [
    {"name": "id", "type": "long"}, {"name": "label", "type": ["null", "long"], "default": None},
    {"name": "features", "type": {"type": "array", "items": "int"}}]}
VECTOR = FeatureSpec.vector("features")
AVRO = MessageFields(format="avro")


class FakeRegistry:
    """Schemas by id, as a RegistryClient gives them; counts the fetches; ``down`` makes it unavailable."""

    def __init__(self, schemas: dict[int, RegisteredSchema]):
        self.schemas, self.fetched, self.down = schemas, [], False

    def schema(self, schema_id: int) -> RegisteredSchema:
        if self.down:
            raise RegistryUnavailable("the Schema Registry at http://registry cannot be reached: refused")
        self.fetched.append(schema_id)
        if schema_id not in self.schemas:
            raise SchemaNotFound(f"unknown schema id {schema_id}: the Schema Registry has none such")
        return self.schemas[schema_id]


def avro(schema: dict, record: dict) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema), record)
    return out.getvalue()


def registry(**schemas: dict | RegisteredSchema) -> FakeRegistry:
    """Schemas named id1, id2, ...: a dict is an Avro schema, else a RegisteredSchema as it is."""
    return FakeRegistry({int(name[2:]): s if isinstance(s, RegisteredSchema) else
                         RegisteredSchema(int(name[2:]), json.dumps(s)) for name, s in schemas.items()})


def read(fake: FakeRegistry, values: list, spec: FeatureSpec = VECTOR, fields: MessageFields = AVRO):
    return registry_records(AVRO, fake).read(values, spec, fields)


def test_the_frame_is_a_zero_byte_a_big_endian_schema_id_and_the_record():
    assert frame(2**32 - 1, b"x") == b"\x00\xff\xff\xff\xffx"
    assert unframe(frame(258, b"")) == (258, b"")
    assert unframe(b"\x00\x00\x00\x01") == \
        "not in the Confluent wire format: 4 bytes, fewer than the 5 of its header"
    assert unframe(b"\x01\x00\x00\x00\x01\x02") == "not in the Confluent wire format: the first byte is 0x01, not 0x00"


def test_records_decode_by_their_own_writer_schema_and_map_to_examples_as_json_objects_do():
    evolved = {**DIGIT, "fields": [*DIGIT["fields"], {"name": "source", "type": "string", "default": "?"}]}
    fake = registry(id1=DIGIT, id2=evolved)
    values = [frame(1, avro(DIGIT, {"id": 7, "label": 3, "features": [1, 0, 255]})),
              frame(2, avro(evolved, {"id": 8, "label": None, "features": [4, 5, 6], "source": "scanner"}))]
    fmt = message_format(AVRO, registry_records(AVRO, fake))
    decoded = fmt.decode(values, VECTOR, None)
    as_json = decode([b'{"id": 7, "label": 3, "features": [1, 0, 255]}', b'{"id": 8, "features": [4, 5, 6]}'],
                     VECTOR, MessageFields(), None)
    assert decoded.ids == as_json.ids == [7, 8]
    assert decoded.batch.column("features").to_pylist() == as_json.batch.column("features").to_pylist()
    assert decoded.batch.column(LABEL_COLUMN).to_pylist() == [3, None]
    assert decoded.label_kind == "number" and not decoded.problems.bad.any()


def test_each_schema_is_fetched_once_and_an_unknown_id_is_asked_again_only_after_a_while():
    fake = registry(id1=DIGIT)
    records = registry_records(AVRO, fake)
    value = frame(1, avro(DIGIT, {"id": 1, "label": None, "features": [1, 2, 3]}))
    for _ in range(3):
        records.read([value, value, frame(9, b"")], VECTOR, AVRO)
    assert sorted(fake.fetched) == [1, 9]
    now = [0.0]
    cache = SchemaCache(fake, parse_avro, clock=lambda: now[0])
    for moment in (0.0, 5.0, 9.9, 10.0, 15.0):
        now[0] = moment
        assert cache.resolve([9]) == {9: "unknown schema id 9: the Schema Registry has none such"}
    assert fake.fetched[2:] == [9, 9]  # at 0 and at 10 s
    fake.schemas[9] = fake.schemas[1]  # registered since: found once asked again
    now[0] = 20.0
    assert not isinstance(cache.resolve([9])[9], str)


def test_unknown_ids_remembered_are_bounded():
    """Records may name any of 2**32 ids: beyond MOST_MISSING, the oldest are forgotten (and asked again)."""
    fake = registry(id1=DIGIT)
    cache = SchemaCache(fake, parse_avro, clock=lambda: 0.0)
    unknown = range(100, 100 + MOST_MISSING + 5)
    for start in range(0, len(unknown), MOST_FETCHES_PER_POLL):  # a poll of its own each
        cache.resolve(unknown[start:start + MOST_FETCHES_PER_POLL])
    assert len(fake.fetched) == len(unknown)
    cache.resolve([100])
    assert fake.fetched.count(100) == 2


def test_one_poll_asks_the_registry_for_a_bounded_number_of_ids_and_each_unknown_one_once():
    """3,000 records of as many ids the registry does not know, in one poll: at most
    MOST_FETCHES_PER_POLL requests (the fast path's lookup and the records' own included), the ids
    of the most records first; the records of the ids left are that poll's dead letters, and
    those ids are asked for in a later poll."""
    fake = registry(id1=DIGIT)
    good = frame(1, avro(DIGIT, {"id": 1, "label": 2, "features": [1, 2, 3]}))
    values = [frame(1000 + i, b"\x02") for i in range(3000)] + [good, good]  # id 1: the most records
    messages = message_format(AVRO, registry_records(AVRO, fake))
    decoded = messages.decode(values, VECTOR, None)
    assert len(fake.fetched) == MOST_FETCHES_PER_POLL and fake.fetched[0] == 1
    problems = decoded.problems.message.tolist()
    assert problems[-2:] == [None, None] and decoded.problems.bad[:3000].all()
    asked = {f"unknown schema id {i}: the Schema Registry has none such" for i in fake.fetched[1:]}
    assert {p for p in problems if p is not None and p.startswith("unknown")} == asked
    left = [p for p in problems[:3000] if not p.startswith("unknown")]
    assert len(left) == 3000 - (MOST_FETCHES_PER_POLL - 1)
    assert all(p.startswith("schema id ") and "was not fetched: the records of this poll name more schema ids new "
               "to the worker than the 32 it asks the Schema Registry for in one poll" in p for p in left), left[0]
    assert {reason_of(p) for p in left} == {"schema"}
    messages.decode(values, VECTOR, None)  # the next poll asks for the next ids (the first ones are remembered)
    assert len(fake.fetched) == 2 * MOST_FETCHES_PER_POLL and not set(fake.fetched[:32]) & set(fake.fetched[32:])


def test_an_unavailable_registry_raises_before_any_record_is_read_and_is_asked_again():
    fake = registry(id1=DIGIT)
    records = registry_records(AVRO, fake)
    value = frame(1, avro(DIGIT, {"id": 1, "label": None, "features": [1, 2, 3]}))
    fake.down = True
    with pytest.raises(RegistryUnavailable):
        records.read([value], VECTOR, AVRO)
    fake.down = False
    assert records.read([value], VECTOR, AVRO)[1] == [None]
    fake.down = True  # a schema already fetched needs no registry
    assert records.read([value], VECTOR, AVRO)[0][0]["id"] == 1


@pytest.mark.parametrize("value, problem, reason", [
    (b'{"features": [1, 2, 3]}', "not in the Confluent wire format: the first byte is 0x7b, not 0x00",
     "not_wire_format"),
    (b"\x00\x00\x01", "not in the Confluent wire format: 3 bytes, fewer than the 5 of its header", "not_wire_format"),
    (frame(99, b"\x02"), "unknown schema id 99: the Schema Registry has none such", "unknown_schema"),
    (frame(1, avro(DIGIT, {"id": 1, "label": 1, "features": [1, 2, 3]})[:-2]),
     "record does not decode with its schema 1: EOFError", "undecodable"),
    (frame(1, avro(DIGIT, {"id": 1, "label": 1, "features": [1, 2, 3]}) + b"\x00"),
     "record does not decode with its schema 1: 1 bytes are left over after its last field", "undecodable"),
    (frame(1, b"\x02\x09"), "record does not decode with its schema 1: IndexError", "undecodable"),
    (frame(2, b"\x02"), "schema 2 has no field 'features', where the features are", "schema"),
    (frame(3, b"\x02"), "schema 3 is a PROTOBUF schema; --format avro reads Avro schemas", "schema"),
    (frame(4, b"\x02"), "schema 4 is not a valid Avro schema", "schema"),
    (frame(5, b"\x02"), "schema 5 is not an Avro record: a message is one record with named fields", "schema"),
    (frame(6, b"\x06abc\x02\x02\x00"), "field 'id' must be a string or a number", "malformed"),
    (None, "empty message (null value)", "empty"),
])
def test_each_bad_record_has_its_problem_named(value, problem, reason):
    fake = registry(id1=DIGIT, id2={"type": "record", "name": "Other", "fields": [{"name": "id", "type": "long"}]},
                    id3=RegisteredSchema(3, 'syntax = "proto3";', "PROTOBUF"),
                    id4=RegisteredSchema(4, '{"type": "record"'), id5="long",
                    id6={**DIGIT, "fields": [{"name": "id", "type": "bytes"}, *DIGIT["fields"][1:]]})
    records, problems = read(fake, [value])
    assert records == [None]
    assert problems[0].startswith(problem)
    assert reason_of(problems[0]) == reason


def test_a_field_of_the_wrong_type_is_the_records_problem_as_in_json():
    schema = {**DIGIT, "fields": [*DIGIT["fields"][:2], {"name": "features", "type": "string"}]}
    fmt = message_format(AVRO, registry_records(AVRO, registry(id1=schema)))
    decoded = fmt.decode([frame(1, avro(schema, {"id": 1, "label": 1, "features": "1,2,3"}))], VECTOR, None)
    assert decoded.problems.message[0] == "field 'features' must be a list of numbers"


def test_named_features_come_from_an_inner_record_and_text_from_a_string_field():
    inner = {"type": "record", "name": "Person", "fields": [
        {"name": "id", "type": "string"}, {"name": "label", "type": ["null", "string"]},
        {"name": "features", "type": {"type": "record", "name": "F", "fields": [
            {"name": "age", "type": "int"}, {"name": "income", "type": "double"}]}}]}
    spec = FeatureSpec.numeric_columns(["age", "income"])
    fmt = message_format(AVRO, registry_records(AVRO, registry(id1=inner)))
    decoded = fmt.decode([frame(1, avro(inner, {"id": "p-1", "label": "yes", "features": {"age": 30, "income": 2.5}}))],
                         spec, None)
    assert decoded.ids == ["p-1"] and decoded.batch.column("income").to_pylist() == [2.5]
    text = {"type": "record", "name": "Sms", "fields": [{"name": "text", "type": "string"},
                                                         {"name": "label", "type": "string"}]}
    fmt = message_format(AVRO, registry_records(AVRO, registry(id1=text)))
    decoded = fmt.decode([frame(1, avro(text, {"text": "WINNER!!", "label": "spam"}))],
                         FeatureSpec.text("text", hash_bits=8), None)
    assert decoded.batch.column("text").to_pylist() == ["WINNER!!"]
    assert decoded.batch.column(LABEL_COLUMN).to_pylist() == ["spam"]


def test_garbage_never_raises_anything_but_is_each_records_problem():
    schema = {"type": "record", "name": "All", "fields": [
        {"name": "features", "type": {"type": "array", "items": "double"}},
        {"name": "m", "type": {"type": "map", "values": "float"}},
        {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["a", "b"]}},
        {"name": "s", "type": ["null", "string", "bytes"]},
        {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}}]}
    rng = np.random.default_rng(0)
    values = [frame(1, rng.integers(0, 256, rng.integers(1, 64)).astype(np.uint8).tobytes()) for _ in range(3000)]
    records, problems = read(registry(id1=schema), values)
    assert all((r is None) != (p is None) for r, p in zip(records, problems, strict=True))
    assert sum(p is not None for p in problems) > 2900


def test_a_schema_nested_deeper_than_the_stack_is_a_schema_problem_not_a_crash():
    deep = ('{"type": "record", "name": "R", "fields": [{"name": "features", "type": '
            + '{"type": "array", "items": ' * 3000 + '"int"' + '}' * 3000 + '}]}')
    fake = registry(id1=DIGIT)
    fake.schemas[2] = RegisteredSchema(2, deep)
    got = message_format(AVRO, registry_records(AVRO, fake)).decode([frame(2, b"\x00")], VECTOR, None)
    (row, _, message), = list(got.problems)
    assert message == "schema 2 nests deeper than this worker reads" and reason_of(message) == "schema"
