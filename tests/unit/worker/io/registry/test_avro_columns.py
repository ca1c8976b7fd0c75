"""Avro records of scalar fields read a field at a time across a poll (``avro_columns``): whatever
it takes, it reads exactly as fastavro does record by record; anything else it leaves to the
general path."""

from __future__ import annotations

import io

import fastavro
import numpy as np
import pytest

from worker.io.registry.avro_columns import read_columns
from worker.io.registry.avro_vectors import scalar_plan

from .test_avro_vectors import encoded, garbled

SCHEMA = {"type": "record", "name": "Row", "fields": [
    {"name": "flag", "type": "boolean"}, {"name": "weight", "type": ["null", "double"]},
    {"name": "id", "type": ["null", "long"]}, {"name": "note", "type": ["null", "bytes"]},
    {"name": "text", "type": ["null", "string"]}, {"name": "ratio", "type": "float"},
    {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["a", "b", "c"]}},
    {"name": "label", "type": ["string", "null"]}, {"name": "count", "type": "int"}]}
WANTED = ("flag", "weight", "id", "text", "ratio", "kind", "label", "count")
EDGES = [0, -1, 1, 63, 64, -64, -65, 8191, 8192, 2**31 - 1, -2**31, 2**53 + 1, 2**63 - 1, -2**63]


def random_rows(rng: np.random.Generator, n: int = 300) -> list[dict]:
    words = ["", "a", "héllo", "wörld 🎉", "x" * 300, "tab\there"]
    return [{"flag": bool(rng.integers(2)), "weight": None if i % 7 == 0 else float(rng.normal()),
             "id": None if i % 11 == 0 else int(EDGES[i % len(EDGES)] if i % 3 == 0 else rng.integers(-10**6, 10**6)),
             "note": None if i % 2 else bytes(rng.integers(0, 256, int(rng.integers(0, 9))).astype(np.uint8)),
             "text": None if i % 13 == 0 else str(rng.choice(words)) + str(i),
             "ratio": float(np.float32(rng.normal())), "kind": str(rng.choice(["a", "b", "c"])),
             "label": None if i % 5 == 0 else str(rng.choice(["ham", "spam"])),
             "count": int(EDGES[i % 11] if i % 2 else rng.integers(-99, 99))} for i in range(n)]


def read(values: list[bytes], schema: dict = SCHEMA, wanted: tuple = WANTED):
    buffer = b"".join(value[5:] for value in values)
    sizes = np.array([len(value) - 5 for value in values])
    ends = np.cumsum(sizes)
    return read_columns(buffer, ends - sizes, ends, scalar_plan(fastavro.parse_schema(schema)), wanted)


def test_every_field_reads_as_fastavro_reads_it_record_by_record():
    rows = random_rows(np.random.default_rng(1))
    columns = read(encoded(SCHEMA, rows))
    assert columns is not None and set(columns) == set(WANTED)
    for name in WANTED:
        expected = [row[name] for row in rows]
        got = columns[name].to_pylist()
        if name == "ratio":  # a float: written as the nearest float32, as fastavro reads it back
            np.testing.assert_array_equal(np.array(got, dtype=np.float32), np.array(expected, dtype=np.float32))
        else:
            assert got == expected, name


def test_a_column_of_two_kinds_or_of_bytes_is_left_to_the_general_way():
    mixed = {"type": "record", "name": "Row", "fields": [{"name": "id", "type": ["null", "string", "long"]}]}
    assert read(encoded(mixed, [{"id": "m1"}, {"id": 2}]), mixed, ("id",)) is None
    assert read(encoded(mixed, [{"id": "m1"}, {"id": None}]), mixed, ("id",))["id"].to_pylist() == ["m1", None]
    assert read(encoded(SCHEMA, random_rows(np.random.default_rng(2), 4)), SCHEMA, ("note",)) is None


@pytest.mark.parametrize("seed", range(3))
def test_a_record_cut_short_running_on_or_garbled_gives_none_or_what_fastavro_reads(seed):
    rows = random_rows(np.random.default_rng(seed), 20)
    values = encoded(SCHEMA, rows)
    parsed = fastavro.parse_schema(SCHEMA)
    rng = np.random.default_rng(seed + 10)
    for _ in range(300):
        bad = garbled(values[7], rng)
        columns = read(values[:7] + [bad] + values[8:])
        if columns is None:
            continue
        # a changed byte may still make a valid record: then fastavro reads the same, to its end
        stream = io.BytesIO(bytes(bad[5:]))
        record = fastavro.schemaless_reader(stream, parsed, None)
        assert stream.tell() == len(bad) - 5
        for name in ("id", "text", "label", "kind", "count"):
            assert columns[name][7].as_py() == record[name], name
