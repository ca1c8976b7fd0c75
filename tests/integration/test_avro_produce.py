"""`worker produce --format avro`: Parquet rows as Avro records in the Confluent wire format, read
back by confluent_kafka's own AvroDeserializer."""

from __future__ import annotations

import json

import pyarrow.parquet as pq

from tests.helpers.cli import run_worker
from tests.helpers.kafka import new_topic, read_all
from tests.helpers.paths import SMS
from tests.helpers.registry import avro_records, registry_client


def produce(bootstrap: str, topic: str, registry_url: str, client: str, *extra):
    return run_worker("produce", SMS / "test.parquet", "--bootstrap", bootstrap, "--topic", topic, "--text", "text",
                      "--label", "label", "--id", "id", "--kafka-client", client, "--format", "avro",
                      "--schema-registry", registry_url, *extra, timeout=120)


def test_produced_records_are_read_back_by_confluents_deserializer(kafka_bootstrap, schema_registry_url,
                                                                   kafka_client):
    expected = pq.read_table(SMS / "test.parquet", columns=["text", "label", "id"]).to_pylist()
    topic = new_topic(kafka_bootstrap, "produce-avro")
    result = produce(kafka_bootstrap, topic, schema_registry_url, kafka_client)
    assert result.returncode == 0, result.stderr
    assert f"sent {len(expected):,} messages" in result.stdout
    records = read_all(kafka_bootstrap, topic, expected=len(expected))
    assert avro_records(schema_registry_url, [r.value for r in records], topic) == expected
    assert [r.key for r in records] == [str(row["id"]).encode() for row in expected]
    registered = registry_client(schema_registry_url).get_latest_version(f"{topic}-value")
    fields = {f["name"]: f["type"] for f in json.loads(registered.schema.schema_str)["fields"]}
    assert fields == {"text": ["null", "string"], "label": ["null", "string"], "id": ["null", "long"]}

    again = new_topic(kafka_bootstrap, "produce-avro-by-id")
    result = produce(kafka_bootstrap, again, schema_registry_url, kafka_client, "--schema-id", registered.schema_id,
                     "--limit", 10)
    assert result.returncode == 0, result.stderr
    values = [r.value for r in read_all(kafka_bootstrap, again, expected=10)]
    assert {int.from_bytes(v[1:5], "big") for v in values} == {registered.schema_id}
    assert avro_records(schema_registry_url, values, again) == expected[:10]
    assert not registry_client(schema_registry_url).get_subjects().count(f"{again}-value")


def test_a_schema_id_the_registry_does_not_know_is_one_line(kafka_bootstrap, schema_registry_url):
    topic = new_topic(kafka_bootstrap, "produce-avro-unknown")
    result = produce(kafka_bootstrap, topic, schema_registry_url, "kafka-python", "--schema-id", 987_654)
    assert result.returncode == 2
    assert result.stderr.strip() == "error: --schema-id: unknown schema id 987654: the Schema Registry has none such."
