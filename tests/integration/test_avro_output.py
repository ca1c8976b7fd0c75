"""`worker serve --output-format avro`: predictions as Avro records in the Confluent wire format, their
schema registered under OUTPUT-value in a real Schema Registry, read by confluent_kafka's own
AvroDeserializer as what the JSON predictions of the same rows say."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.helpers.cli import run_worker
from tests.helpers.kafka import new_topic, read_all, send
from tests.helpers.registry import avro_records, registry_client
from tests.helpers.service import Service, labeled_messages


def test_avro_predictions_say_what_the_json_ones_say(kafka_bootstrap, schema_registry_url, kafka_client, tmp_path):
    values, _, _ = labeled_messages(300, np.random.default_rng(17))
    values[5] = json.dumps({"id": "text-id", "features": [1, 2, 3, 4, 5, 6]}).encode()  # unlabeled, a string id
    topic = new_topic(kafka_bootstrap, "avro-out")
    send(kafka_bootstrap, topic, values)
    services = [Service(kafka_bootstrap, topic, tmp_path, client=kafka_client, group=f"{topic}-json", name="json"),
                Service(kafka_bootstrap, topic, tmp_path, "--output-format", "avro", "--schema-registry",
                        schema_registry_url, client=kafka_client,
                        group=f"{topic}-avro", name="avro")]
    services[1].output = f"{topic}.avro"
    try:
        for service in services:
            service.start()
        plain, framed = (read_all(kafka_bootstrap, s.output, expected=300, committed_only=True) for s in services)
        assert len(plain) == len(framed) == 300, services[1].log_tail()
        decoded = avro_records(schema_registry_url, [r.value for r in framed], services[1].output)
        expected = [json.loads(r.value) for r in plain]
        assert sorted(decoded, key=lambda p: p["offset"]) == sorted(expected, key=lambda p: p["offset"])
        assert {p["id"] for p in decoded} >= {"text-id", 0, 299}
        subject = registry_client(schema_registry_url).get_latest_version(f"{services[1].output}-value")
        assert json.loads(subject.schema.schema_str)["name"] == "Prediction"
        for service in services:
            assert service.terminate() == 0, service.log_tail()
    finally:
        for service in services:
            if service.running():
                service.kill()


@pytest.mark.parametrize("extra, message", [
    ([], "--output-format avro needs --schema-registry URL"),
    (["--schema-registry", "http://127.0.0.1:9", "--format", "arrow"], "--format arrow is answered in Arrow"),
])
def test_avro_predictions_that_cannot_be_are_refused_in_one_line(kafka_bootstrap, extra, message):
    result = run_worker("serve", "--bootstrap", kafka_bootstrap, "--input", "in", "--output", "out", "--group", "g",
                        "--output-format", "avro", *extra, timeout=60)
    assert result.returncode == 2 and message in result.stderr and "Traceback" not in result.stderr, result.stderr
