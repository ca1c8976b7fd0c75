"""JSON Schema records (`--format json-schema`) to examples: a JSON object after the frame, read as a
plain JSON message is (bulk and one by one), each problem named, on a fake registry (the real one is
in tests/integration/test_json_schema_serve.py)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from nbstream.arrow import FeatureSpec
from worker.io.fields import LABEL_COLUMN, MessageFields
from worker.io.formats import message_format
from worker.io.kafka.dead_letters import reason_of
from worker.io.messages import decode
from worker.io.registry.client import RegisteredSchema
from worker.io.registry.records import registry_records
from worker.io.registry.wire import frame

from .test_records import DIGIT, FakeRegistry

JSON_SCHEMA = MessageFields(format="json-schema")
PLAIN = MessageFields()
EXAMPLE = {"type": "object", "properties": {"id": {"type": "integer"}, "label": {"type": ["string", "null"]},
                                            "features": {"type": "array", "items": {"type": "number"}},
                                            "text": {"type": "string"}}}


def registry(**schemas) -> FakeRegistry:
    """JSON Schemas named id1, id2, ... (a RegisteredSchema is taken as it is)."""
    return FakeRegistry({int(name[2:]): s if isinstance(s, RegisteredSchema) else
                         RegisteredSchema(int(name[2:]), json.dumps(s), "JSON") for name, s in schemas.items()})


def decoded(values: list, spec: FeatureSpec, fake: FakeRegistry | None = None):
    return message_format(JSON_SCHEMA, registry_records(JSON_SCHEMA, fake or registry(id1=EXAMPLE))).decode(
        values, spec, None)


@pytest.mark.parametrize("spec, objects", [
    (FeatureSpec.vector("features"), [{"id": i, "features": [i, 2.5, 0], "label": "ab"[i % 2]} for i in range(6)]),
    (FeatureSpec.vector("features"), [{"id": 2**70, "features": [1, 2, 3]}, {"id": "x", "features": [0, 0, 1]}]),
    (FeatureSpec.text("text", 10), [{"id": i, "text": f"win {i} prizes", "label": "spam"} for i in range(3)]),
])
def test_records_are_the_examples_their_json_objects_are_as_plain_messages(spec, objects):
    payloads = [json.dumps(o).encode() for o in objects]
    got, expected = decoded([frame(1, p) for p in payloads], spec), decode(payloads, spec, PLAIN)
    assert got.batch.equals(expected.batch) and got.ids == expected.ids
    assert not got.problems.any()


def test_a_record_of_an_id_beyond_64_bits_keeps_it_exactly():
    got = decoded([frame(1, b'{"id": 1180591620717411303424, "features": [1, 2]}')], FeatureSpec.vector("features"))
    assert got.ids == [2**70]


@pytest.mark.parametrize("value, error, reason", [
    (b'{"id": 1, "features": [1]}', "not in the Confluent wire format", "not_wire_format"),
    (frame(9, b'{"features": [1]}'), "unknown schema id 9", "unknown_schema"),
    (frame(2, b'{"features": [1]}'), "schema 2 is a AVRO schema; --format json-schema reads JSON Schemas", "schema"),
    (frame(3, b'{"features": [1]}'), "schema 3 is not a JSON Schema of an object with properties", "schema"),
    (frame(4, b'{"features": [1]}'), "schema 4 has no field 'features'", "schema"),
    (frame(5, b'{"features": [1]}'), "schema 5 refers to other schemas", "schema"),
    (frame(1, b'{"features": [1'), "record does not decode with its schema 1: malformed JSON", "undecodable"),
    (frame(1, b'{"features": [1], "features": [2]}'), "record does not decode with its schema 1: duplicate key",
     "undecodable"),
    (frame(1, b'{"features": [NaN]}'), "record does not decode with its schema 1: malformed JSON", "undecodable"),
    (frame(1, b""), "record does not decode with its schema 1: empty message", "undecodable"),
    (frame(1, b'{"features": "seven"}'), "field 'features' must be a list of numbers", "malformed"),
])
def test_each_bad_record_alone_is_one_problem_with_its_reason(value, error, reason):
    fake = registry(id1=EXAMPLE, id2=RegisteredSchema(2, json.dumps(DIGIT)), id3={"type": "string"},
                    id4={"type": "object", "properties": {"text": {}}},
                    id5=RegisteredSchema(5, json.dumps(EXAMPLE), "JSON", ("x",)))
    got = decoded([value], FeatureSpec.vector("features"), fake)
    (row, _, message), = list(got.problems)
    assert row == 0 and message.startswith(error), message
    assert reason_of(message) == reason


def test_a_bad_record_among_good_ones_is_the_only_problem_and_the_others_are_read():
    values = [frame(1, b'{"id": 1, "features": [1, 2], "label": "a"}'), frame(1, b"{oops"),
              frame(1, b'{"id": 3, "features": [3, 4], "label": "b"}')]
    got = decoded(values, FeatureSpec.vector("features"))
    assert [row for row, _, _ in got.problems] == [1]
    assert got.batch.column(LABEL_COLUMN).to_pylist() == ["a", None, "b"]
    np.testing.assert_array_equal(np.array(got.batch.column("features").to_pylist()[2]), [3, 4])


def test_each_schema_is_fetched_once():
    fake = registry(id1=EXAMPLE)
    records = registry_records(JSON_SCHEMA, fake)
    fmt = message_format(JSON_SCHEMA, records)
    for _ in range(3):
        fmt.decode([frame(1, b'{"id": 1, "features": [1]}')] * 4, FeatureSpec.vector("features"), None)
    assert fake.fetched == [1]
