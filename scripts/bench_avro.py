"""Decode cost of `worker serve --format avro|json-schema|protobuf` against the JSON path, per MNIST
record (784 pixels).

    .venv/bin/python scripts/bench_avro.py [--rows 10000] [--data ../shared/data/mnist]

Times one poll's decoding (message values to the Arrow batch the encoder takes) five ways: JSON
messages (simdjson), JSON Schema records (the same JSON after the wire format's frame), Avro
records on the fast path (``worker/io/registry/avro_vectors.py``), Avro records read one by
one by fastavro (what any other schema gets) and Protobuf records (``repeated int64`` pixels, as
`worker produce --format protobuf` writes them), each the best of five. The registry is a
stand-in holding the one schema: fetching it is not part of the cost.
"""

from __future__ import annotations

import argparse
import io
import json
import sys
import time
from pathlib import Path

import fastavro
import orjson
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from nbstream.arrow import FeatureSpec  # noqa: E402
from scripts.datasets import load_mnist  # noqa: E402
from worker.io.fields import MessageFields  # noqa: E402
from worker.io.formats import message_format  # noqa: E402
from worker.io.messages import decode_objects  # noqa: E402
from worker.io.registry.client import RegisteredSchema  # noqa: E402
from worker.io.registry.protobuf_writer import ProtobufWriter  # noqa: E402
from worker.io.registry.records import registry_records  # noqa: E402
from worker.io.registry.wire import frame  # noqa: E402

DIGIT = {"type": "record", "name": "Digit", "fields": [
    {"name": "id", "type": "long"}, {"name": "label", "type": ["null", "long"]},
    {"name": "features", "type": {"type": "array", "items": "int"}}]}


DIGIT_JSON = {"type": "object", "properties": {"id": {"type": "integer"}, "label": {"type": ["integer", "null"]},
                                               "features": {"type": "array", "items": {"type": "integer"}}}}


class OneSchema:
    """A registry holding one schema, of any format (a dict is JSON text), or the one registered to it."""

    def __init__(self, schema: dict | None = None, schema_type: str = "AVRO"):
        self.text, self.schema_type = json.dumps(schema), schema_type

    def schema(self, schema_id: int) -> RegisteredSchema:
        return RegisteredSchema(schema_id, self.text, self.schema_type)

    def register(self, subject: str, text: str, schema_type: str = "AVRO") -> int:
        self.text, self.schema_type = text, schema_type
        return 1


def best_microseconds(decode, values: list[bytes]) -> float:
    times = []
    for _ in range(5):
        started = time.perf_counter()
        decode(values)
        times.append(time.perf_counter() - started)
    return min(times) / len(values) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=10_000, help="records in the poll")
    parser.add_argument("--data", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "data" / "mnist")
    args = parser.parse_args()
    mnist = load_mnist(args.data)
    images, labels = mnist["train_images"][:args.rows], mnist["train_labels"][:args.rows]
    rows = [{"id": i, "label": int(label), "features": image.tolist()}
            for i, (image, label) in enumerate(zip(images, labels, strict=True))]
    parsed = fastavro.parse_schema(DIGIT)
    avro = []
    for row in rows:
        out = io.BytesIO()
        fastavro.schemaless_writer(out, parsed, row)
        avro.append(frame(1, out.getvalue()))
    as_json = [orjson.dumps(row) for row in rows]
    framed_json = [frame(1, value) for value in as_json]
    spec = FeatureSpec.vector("features")
    json_format = message_format(MessageFields())
    fields = MessageFields(format="avro")
    records = registry_records(fields, OneSchema(DIGIT))  # type: ignore[arg-type]
    avro_format = message_format(fields, records)
    json_schema = MessageFields(format="json-schema")
    json_schema_format = message_format(json_schema, registry_records(
        json_schema, OneSchema(DIGIT_JSON, "JSON")))  # type: ignore[arg-type]

    protobuf_registry = OneSchema()
    protobuf = ProtobufWriter.registered(protobuf_registry, "mnist-value",  # type: ignore[arg-type]
                                         pa.Table.from_pylist(rows[:1]).schema).values(pa.Table.from_pylist(rows))
    protobuf_fields = MessageFields(format="protobuf")
    protobuf_format = message_format(protobuf_fields, registry_records(
        protobuf_fields, protobuf_registry))  # type: ignore[arg-type]

    def one_by_one(values: list[bytes]):
        return decode_objects(*records.read(values, spec, fields), spec, fields)
    print(f"{len(rows):,} MNIST records; bytes per message: JSON {sum(map(len, as_json)) / len(rows):,.0f}, "
          f"Avro {sum(map(len, avro)) / len(rows):,.0f}, Protobuf {sum(map(len, protobuf)) / len(rows):,.0f}")
    print(f"JSON (simdjson)           {best_microseconds(lambda v: json_format.decode(v, spec, None), as_json):6.1f} "
          f"µs per record")
    print(f"JSON Schema (simdjson)    "
          f"{best_microseconds(lambda v: json_schema_format.decode(v, spec, None), framed_json):6.1f} µs per record")
    print(f"Avro, fast path           {best_microseconds(lambda v: avro_format.decode(v, spec, None), avro):6.1f} "
          f"µs per record")
    print(f"Avro, fastavro one by one {best_microseconds(one_by_one, avro):6.1f} "
          f"µs per record")
    print(f"Protobuf (upb)            "
          f"{best_microseconds(lambda v: protobuf_format.decode(v, spec, None), protobuf):6.1f} µs per record")


if __name__ == "__main__":
    main()
