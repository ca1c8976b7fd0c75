"""Decode cost of `worker serve --format avro` against the JSON path, per MNIST record (784 pixels).

    .venv/bin/python scripts/bench_avro.py [--rows 10000] [--data ../shared/data/mnist]

Times one poll's decoding (message values to the Arrow batch the encoder takes) three ways: JSON
messages (simdjson), Avro records on the fast path (``worker/io/registry/avro_vectors.py``) and
Avro records read one by one by fastavro (what any other schema gets), each the best of five.
The registry is a stand-in holding the one schema: fetching it is not part of the cost.
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

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from nbstream.arrow import FeatureSpec  # noqa: E402
from scripts.datasets import load_mnist  # noqa: E402
from worker.io.fields import MessageFields  # noqa: E402
from worker.io.formats import message_format  # noqa: E402
from worker.io.messages import decode_objects  # noqa: E402
from worker.io.registry.client import RegisteredSchema  # noqa: E402
from worker.io.registry.records import registry_records  # noqa: E402
from worker.io.registry.wire import frame  # noqa: E402

DIGIT = {"type": "record", "name": "Digit", "fields": [
    {"name": "id", "type": "long"}, {"name": "label", "type": ["null", "long"]},
    {"name": "features", "type": {"type": "array", "items": "int"}}]}


class OneSchema:
    def schema(self, schema_id: int) -> RegisteredSchema:
        return RegisteredSchema(schema_id, json.dumps(DIGIT))


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
    spec = FeatureSpec.vector("features")
    json_format = message_format(MessageFields())
    records = registry_records("avro", OneSchema())  # type: ignore[arg-type]
    avro_format = message_format(MessageFields(format="avro"), records)
    fields = MessageFields(format="avro")

    def one_by_one(values: list[bytes]):
        return decode_objects(*records.read(values, spec, fields), spec, fields)
    print(f"{len(rows):,} MNIST records; bytes per message: JSON {sum(map(len, as_json)) / len(rows):,.0f}, "
          f"Avro {sum(map(len, avro)) / len(rows):,.0f}")
    print(f"JSON (simdjson)           {best_microseconds(lambda v: json_format.decode(v, spec, None), as_json):6.1f} "
          f"µs per record")
    print(f"Avro, fast path           {best_microseconds(lambda v: avro_format.decode(v, spec, None), avro):6.1f} "
          f"µs per record")
    print(f"Avro, fastavro one by one {best_microseconds(one_by_one, avro):6.1f} "
          f"µs per record")


if __name__ == "__main__":
    main()
