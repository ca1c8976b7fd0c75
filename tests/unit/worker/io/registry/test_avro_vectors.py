"""The fast path for Avro records whose features are one array of numbers: whatever it takes, it
reads exactly as the general path (fastavro) does; anything else it leaves to the general path."""

from __future__ import annotations

import io
import json

import fastavro
import numpy as np
import pytest

from nbstream.arrow import FeatureSpec
from worker.io.fields import MessageFields
from worker.io.formats import message_format
from worker.io.registry.client import RegisteredSchema
from worker.io.registry.records import registry_records
from worker.io.registry.wire import frame

AVRO = MessageFields(format="avro")
EDGES = {"int": [0, -1, 1, 63, 64, -64, -65, 8191, 8192, 2**31 - 1, -2**31],
         "long": [0, -1, 64, -65, 2**31, 2**53 + 1, 2**63 - 1, -2**63]}


class OneSchema:
    """A registry holding one schema, as id 1."""

    def __init__(self, schema: dict):
        self.text = json.dumps(schema)

    def schema(self, schema_id: int) -> RegisteredSchema:
        return RegisteredSchema(schema_id, self.text)


def schema_of(items: str, after: bool = False) -> dict:
    fields = [{"name": "id", "type": ["null", "string", "long"]}, {"name": "label", "type": ["null", "long", "string"]},
              {"name": "features", "type": {"type": "array", "items": items}}]
    more = [{"name": "weight", "type": "double"}, {"name": "flag", "type": "boolean"},
            {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["a", "b"]}},
            {"name": "note", "type": ["null", "bytes"]}]
    return {"type": "record", "name": "Row", "fields": fields + more if after else more + fields}


def encoded(schema: dict, rows: list[dict]) -> list[bytes]:
    parsed = fastavro.parse_schema(schema)
    values = []
    for row in rows:
        out = io.BytesIO()
        fastavro.schemaless_writer(out, parsed, row)
        values.append(frame(1, out.getvalue()))
    return values


def garbled(value: bytes, rng: np.random.Generator) -> bytes:
    """A framed record cut short, running on, or with a byte changed (never in its frame)."""
    bad = bytearray(value)
    choice = rng.integers(3)
    if choice == 0:
        bad = bad[:int(rng.integers(5, len(bad)))]
    elif choice == 1:
        bad += bytes(rng.integers(0, 256, int(rng.integers(1, 4))).astype(np.uint8))
    else:
        bad[int(rng.integers(5, len(bad)))] = int(rng.integers(256))
    return bytes(bad)


def random_rows(items: str, rng: np.random.Generator, n: int = 200) -> list[dict]:
    rows = []
    for i in range(n):
        size = int(rng.integers(0, 40))
        if items in EDGES:
            top = 2**31 if items == "int" else 2**63
            features = rng.integers(-top, top, size, dtype=np.int64).tolist() + EDGES[items][:int(rng.integers(0, 12))]
        else:
            features = rng.normal(size=size).astype(np.float32 if items == "float" else np.float64).tolist()
        rows.append({"id": f"m{i}" if i % 3 else i, "label": None if i % 4 == 0 else int(i % 7), "features": features,
                     "weight": 0.5, "flag": bool(i % 2), "kind": "b", "note": None if i % 2 else b"\x80\xff"})
    return rows


@pytest.mark.parametrize("items", ["int", "long", "float", "double"])
@pytest.mark.parametrize("after", [False, True])
def test_the_fast_path_reads_every_record_as_fastavro_does(items, after):
    schema = schema_of(items, after)
    values = encoded(schema, random_rows(items, np.random.default_rng(len(items))))
    records = registry_records(AVRO, OneSchema(schema))
    fast = records.vectors(values, AVRO)
    assert fast is not None
    objects, problems = records.read(values, FeatureSpec.vector("features"), AVRO)
    assert problems == [None] * len(values)
    assert fast.ids == [o["id"] for o in objects] and fast.labels == [o["label"] for o in objects]
    for i, record in enumerate(objects):
        np.testing.assert_array_equal(fast.values[fast.offsets[i]:fast.offsets[i + 1]],
                                      np.array(record["features"], dtype=np.float64))


@pytest.mark.parametrize("union", [["null", "ARRAY"], ["ARRAY", "null"]])
def test_a_nullable_features_array_takes_the_fast_path_and_a_null_one_the_general_way(union):
    schema = schema_of("int")
    array = schema["fields"][-1]["type"]
    schema["fields"][-1]["type"] = [array if branch == "ARRAY" else branch for branch in union]
    values = encoded(schema, random_rows("int", np.random.default_rng(9)))
    records = registry_records(AVRO, OneSchema(schema))
    fast = records.vectors(values, AVRO)
    objects, problems = records.read(values, FeatureSpec.vector("features"), AVRO)
    assert fast is not None and problems == [None] * len(values)
    np.testing.assert_array_equal(fast.values, np.concatenate([o["features"] for o in objects]).astype(np.float64))
    with_null = values[:3] + encoded(schema, [{**random_rows("int", np.random.default_rng(1), 1)[0],
                                                "features": None}])
    assert records.vectors(with_null, AVRO) is None
    decoded = message_format(AVRO, records).decode(with_null, FeatureSpec.vector("features"), None)
    assert decoded.problems.bad.tolist() == [False, False, False, True]


def test_a_record_cut_short_running_on_or_garbled_sends_the_poll_the_general_way():
    schema = schema_of("int", after=True)
    values = encoded(schema, random_rows("int", np.random.default_rng(3), 20))
    records = registry_records(AVRO, OneSchema(schema))
    rng = np.random.default_rng(4)
    spec = FeatureSpec.vector("features")
    fmt = message_format(AVRO, records)
    for _ in range(300):
        poll = values[:7] + [garbled(values[7], rng)] + values[8:]
        fast = records.vectors(poll, AVRO)
        general = records.read(poll, spec, AVRO)
        if fast is None:  # the general way names the problem, if there is one
            decoded = fmt.decode(poll, spec, None)
            assert decoded.problems.bad.tolist() == [p is not None for p in general[1]]
        else:  # a byte changed within a value may still make a valid record: then it reads the same
            assert general[1] == [None] * len(poll)
            np.testing.assert_array_equal(fast.values[fast.offsets[7]:fast.offsets[8]], general[0][7]["features"])
            assert fast.labels[7] == general[0][7]["label"] and fast.ids[7] == general[0][7]["id"]


@pytest.mark.parametrize("features", [
    {"type": "array", "items": ["null", "int"]},  # items that may be null
    {"type": "array", "items": {"type": "int", "logicalType": "date"}},
    ["null", {"type": "array", "items": "int"}],  # a features field that may be null
])
def test_other_schemas_are_left_to_the_general_way(features):
    schema = {"type": "record", "name": "Row", "fields": [{"name": "features", "type": features}]}
    records = registry_records(AVRO, OneSchema(schema))
    values = [frame(1, b"\x00"), frame(1, b"\x00")]
    assert records.vectors(values, AVRO) is None


def test_an_array_in_several_blocks_and_a_bytes_id_are_left_to_the_general_way():
    array = {"name": "features", "type": {"type": "array", "items": "int"}}
    schema = {"type": "record", "name": "Row", "fields": [{"name": "id", "type": "bytes"}, array]}
    records = registry_records(AVRO, OneSchema(schema))
    assert records.vectors([frame(1, b"\x02x\x02\x02\x00")] * 2, AVRO) is None  # id b"x"
    blocks = {**schema, "fields": schema["fields"][1:]}
    records = registry_records(AVRO, OneSchema(blocks))
    two_blocks = frame(1, b"\x02\x02\x02\x04\x00")  # [1], then [2]
    assert records.vectors([two_blocks] * 2, AVRO) is None
    decoded = message_format(AVRO, records).decode([two_blocks] * 2, FeatureSpec.vector("features"), None)
    assert decoded.batch.column("features").to_pylist() == [[1, 2], [1, 2]]
