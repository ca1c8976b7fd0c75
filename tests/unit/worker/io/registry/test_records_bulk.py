"""The bulk paths of every registry format, on rows as `worker produce` writes them: a poll of
records reads exactly as the same rows in plain JSON messages, whichever path takes it (lists of
numbers, or text with its label and id), and a record the bulk path cannot take sends the poll
the general way, where only that record is a problem."""

from __future__ import annotations

import numpy as np
import orjson
import pyarrow as pa
import pytest

from nbstream.arrow import FeatureSpec
from worker.io.fields import MessageFields
from worker.io.formats import message_format
from worker.io.messages import decode
from worker.io.registry.avro_writer import AvroWriter
from worker.io.registry.client import RegisteredSchema
from worker.io.registry.json_schema_writer import JsonSchemaWriter
from worker.io.registry.protobuf_writer import ProtobufWriter
from worker.io.registry.records import registry_records
from worker.io.registry.wire import frame

WRITERS = {"avro": AvroWriter, "json-schema": JsonSchemaWriter, "protobuf": ProtobufWriter}
TEXT = FeatureSpec.text("text", 12)
VECTOR = FeatureSpec.vector("features")


class Registered:
    """A registry that keeps what is registered to it, as id 1."""

    def __init__(self):
        self.registered: RegisteredSchema | None = None
        self.fetched: list[int] = []

    def register(self, subject: str, text: str, schema_type: str = "AVRO") -> int:
        self.registered = RegisteredSchema(1, text, schema_type)
        return 1

    def schema(self, schema_id: int) -> RegisteredSchema:
        assert self.registered is not None and schema_id == 1
        self.fetched.append(schema_id)
        return self.registered


def rows_of(kind: str, n: int = 50) -> list[dict]:
    rng = np.random.default_rng(len(kind))
    if kind == "text":
        words = ["win", "cash", "now", "hello", "are", "you", "home", "ünïcode", "prize"]
        return [{"id": i, "text": " ".join(rng.choice(words, int(rng.integers(0, 9)))),
                 "label": None if i % 5 == 0 else ["ham", "spam"][i % 2]} for i in range(n)]
    return [{"id": i, "features": rng.integers(0, 256, 8).tolist(), "label": None if i % 5 == 0 else i % 3}
            for i in range(n)]


def written(message_format_name: str, rows: list[dict]) -> tuple[list[bytes], Registered]:
    registry = Registered()
    table = pa.Table.from_pylist(rows)
    return WRITERS[message_format_name].registered(registry, "t-value", table.schema).values(table), registry


@pytest.mark.parametrize("name", list(WRITERS))
@pytest.mark.parametrize("kind, spec", [("text", TEXT), ("vector", VECTOR)])
def test_a_poll_reads_in_bulk_exactly_as_the_same_rows_in_json(name, kind, spec):
    rows = rows_of(kind)
    values, registry = written(name, rows)
    fields = MessageFields(format=name)
    records = registry_records(fields, registry)  # type: ignore[arg-type]
    bulk = records.table(values, fields) if kind == "text" else records.vectors(values, fields)
    assert bulk is not None  # the fast path takes rows as produce writes them
    got = message_format(fields, records).decode(values, spec, None)
    expected = decode([orjson.dumps(row) for row in rows], spec, MessageFields())
    assert got.batch.equals(expected.batch) and got.ids == expected.ids and not got.problems.any()
    assert registry.fetched == [1]


@pytest.mark.parametrize("name", list(WRITERS))
def test_a_bad_record_in_a_text_poll_is_the_only_problem(name):
    rows = rows_of("text", 6)
    values, registry = written(name, rows)
    fields = MessageFields(format=name)
    poll = values[:3] + [frame(1, b"\x00\xff\xff\xff")] + values[3:]
    records = registry_records(fields, registry)  # type: ignore[arg-type]
    assert records.table(poll, fields) is None
    got = message_format(fields, records).decode(poll, TEXT, None)
    assert [row for row, _, _ in got.problems] == [3]
    expected = decode([orjson.dumps(row) for row in rows], TEXT, MessageFields())
    kept = [i for i in range(len(poll)) if i != 3]
    assert got.batch.take(kept).equals(expected.batch)


@pytest.mark.parametrize("name", ["avro", "protobuf"])
def test_a_nan_label_is_the_records_problem_alone_or_in_a_poll(name):
    rows = [{"id": i, "features": [i, 1], "label": float("nan") if i == 2 else float(i % 2)} for i in range(4)]
    values, registry = written(name, rows)
    fields = MessageFields(format=name)
    for poll, bad_row in ((values[2:3], 0), (values, 2)):
        got = message_format(fields, registry_records(fields, registry)).decode(  # type: ignore[arg-type]
            poll, VECTOR, None)
        assert [(row, message) for row, _, message in got.problems] == [(bad_row, "label is NaN, not a number")]
