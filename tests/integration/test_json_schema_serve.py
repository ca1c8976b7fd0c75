"""`worker serve --format json-schema` and `worker produce --format json-schema`: JSON objects in the
Confluent wire format, written and read back by confluent_kafka's own JSONSerializer and
JSONDeserializer, with their schemas in a real Schema Registry."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from tests.helpers.kafka import new_topic, read_all, send
from tests.helpers.registry import (
    assert_served_as_json,
    json_schema_records,
    json_schema_values,
    produce_rows,
    registry_client,
)
from tests.helpers.service import Service, labeled_messages
from worker.io.registry.wire import frame

EXAMPLE = {"$schema": "http://json-schema.org/draft-07/schema#", "title": "Example", "type": "object",
           "properties": {"id": {"type": "integer"}, "label": {"type": ["string", "null"]},
                          "features": {"type": "array", "items": {"type": "integer"}}},
           "required": ["id", "features"]}


def test_records_of_confluents_serializer_are_predicted_as_the_same_rows_in_json_and_bad_ones_dead_lettered(
        kafka_bootstrap, schema_registry_url, kafka_client, tmp_path):
    values, X, labels = labeled_messages(300, np.random.default_rng(21))
    json_topic, framed_topic = new_topic(kafka_bootstrap, "plain-json"), new_topic(kafka_bootstrap, "json-schema")
    records = [{"id": i, "label": str(label), "features": row.tolist()}
               for i, (row, label) in enumerate(zip(X, labels, strict=True))]
    framed = json_schema_values(schema_registry_url, framed_topic, EXAMPLE, records)
    known = int.from_bytes(framed[0][1:5], "big")
    assert registry_client(schema_registry_url).get_latest_version(f"{framed_topic}-value").schema_id == known
    poison = [b'{"id": 1, "features": [1]}', frame(known, b'{"id": 7, "features": [1, 2'),
              frame(known + 1000, b'{"id": 8, "features": [1]}')]
    send(kafka_bootstrap, json_topic, values)
    send(kafka_bootstrap, framed_topic, framed[:150] + poison + framed[150:])
    services = [Service(kafka_bootstrap, json_topic, tmp_path, client=kafka_client, name="json"),
                Service(kafka_bootstrap, framed_topic, tmp_path, "--format", "json-schema", "--schema-registry",
                        schema_registry_url, client=kafka_client, name="framed")]

    def dead_lettered_with_their_reasons():
        letters = read_all(kafka_bootstrap, f"{framed_topic}.dlq", expected=3, committed_only=True)
        reasons = [dict(r.headers)["__connect.errors.exception.class.name"] for r in letters]
        assert reasons == [b"nbstream.not_wire_format", b"nbstream.undecodable", b"nbstream.unknown_schema"]
        assert [r.value for r in letters] == poison
    assert_served_as_json(kafka_bootstrap, services, X, labels, also=dead_lettered_with_their_reasons)


def test_produced_records_read_back_by_confluents_deserializer(kafka_bootstrap, schema_registry_url, kafka_client,
                                                                tmp_path):
    rows = {"pixels": [[1, 2, 3], [4, 5, 6]], "y": ["a", None], "key": [10, 11]}
    data = tmp_path / "rows.parquet"
    pq.write_table(pa.table(rows), data)
    topic = new_topic(kafka_bootstrap, "produced-json-schema")
    result = produce_rows(kafka_bootstrap, kafka_client, data, topic, schema_registry_url, "json-schema")
    assert result.returncode == 0, result.stderr
    values = [r.value for r in read_all(kafka_bootstrap, topic, expected=2)]
    assert json_schema_records(schema_registry_url, values, topic) == [
        {"features": [1, 2, 3], "label": "a", "id": 10}, {"features": [4, 5, 6], "label": None, "id": 11}]
    registered = registry_client(schema_registry_url).get_latest_version(f"{topic}-value")
    assert registered.schema.schema_type == "JSON" and json.loads(registered.schema.schema_str)["properties"][
        "id"] == {"type": ["integer", "null"]}

    again = new_topic(kafka_bootstrap, "produced-json-schema-by-id")
    result = produce_rows(kafka_bootstrap, kafka_client, data, again, schema_registry_url, "json-schema",
                          "--schema-id", registered.schema_id)
    assert result.returncode == 0, result.stderr
    assert [r.value for r in read_all(kafka_bootstrap, again, expected=2)] == values
