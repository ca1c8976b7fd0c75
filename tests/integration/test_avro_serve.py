"""`worker serve --format avro`: Avro records in the Confluent wire format, written by
confluent_kafka's own AvroSerializer, with their schemas in a real Schema Registry."""

from __future__ import annotations

import json
import time
import urllib.request

import numpy as np
import pytest

from tests.helpers.kafka import TopicWatcher, new_topic, read_all, send
from tests.helpers.registry import assert_served_as_json, avro_values, registry_client, set_compatibility
from tests.helpers.service import (
    Service,
    assert_equal_statistics,
    covered,
    free_port,
    labeled_messages,
    wait_for,
)
from worker.io.registry.wire import frame

EXAMPLE = {"type": "record", "name": "Example", "namespace": "nbstream.test", "fields": [
    {"name": "id", "type": "long"},
    {"name": "label", "type": ["null", "string"], "default": None},
    {"name": "features", "type": {"type": "array", "items": "int"}}]}
# The same with a field added with a default: BACKWARD compatible.
EXAMPLE_V2 = {**EXAMPLE, "fields": [*EXAMPLE["fields"], {"name": "source", "type": "string", "default": "?"}]}


def records_of(X, labels, start_id=0, **more) -> list[dict]:
    return [{"id": start_id + i, "label": str(label), "features": row.tolist(), **more}
            for i, (row, label) in enumerate(zip(X, labels, strict=True))]


def avro_service(bootstrap, topic, folder, registry_url, *extra, client, **kwargs) -> Service:
    return Service(bootstrap, topic, folder, "--format", "avro", "--schema-registry", registry_url, *extra,
                   client=client, **kwargs)


def test_records_of_confluents_serializer_are_predicted_as_the_same_rows_in_json(
        kafka_bootstrap, schema_registry_url, kafka_client, tmp_path):
    values, X, labels = labeled_messages(400, np.random.default_rng(11))
    json_topic, avro_topic = new_topic(kafka_bootstrap, "as-json"), new_topic(kafka_bootstrap, "as-avro")
    send(kafka_bootstrap, json_topic, values)
    send(kafka_bootstrap, avro_topic, avro_values(schema_registry_url, avro_topic, EXAMPLE, records_of(X, labels)))
    services = [Service(kafka_bootstrap, json_topic, tmp_path, client=kafka_client, name="json"),
                avro_service(kafka_bootstrap, avro_topic, tmp_path, schema_registry_url, client=kafka_client,
                             name="avro")]
    assert_served_as_json(kafka_bootstrap, services, X, labels)


def test_each_bad_record_alone_is_dead_lettered_with_its_reason_and_the_service_goes_on(
        kafka_bootstrap, schema_registry_url, kafka_client, tmp_path):
    topic = new_topic(kafka_bootstrap, "avro-poison")
    _, X, labels = labeled_messages(2, np.random.default_rng(3))
    first, last = avro_values(schema_registry_url, topic, EXAMPLE, records_of(X, labels))
    known = int.from_bytes(first[1:5], "big")
    lacking = registry_client(schema_registry_url).register_schema(f"{topic}-other", _schema({
        "type": "record", "name": "Other", "fields": [{"name": "id", "type": "long"}]}))
    poison = [  # (value, the start of the error, its reason)
        (json.dumps({"features": [1] * 6}).encode(), "not in the Confluent wire format: the first byte is 0x7b",
         "not_wire_format"),
        (b"\x00\x00\x01", "not in the Confluent wire format: 3 bytes", "not_wire_format"),
        (frame(999_999, first[5:]), "unknown schema id 999999", "unknown_schema"),
        (first[:-3], f"record does not decode with its schema {known}", "undecodable"),
        (frame(lacking, b"\x02"), f"schema {lacking} has no field 'features'", "schema"),
    ]
    service = avro_service(kafka_bootstrap, topic, tmp_path, schema_registry_url, client=kafka_client).start()
    predictions, dead = TopicWatcher(kafka_bootstrap, service.output), TopicWatcher(kafka_bootstrap, f"{topic}.dlq")
    try:
        send(kafka_bootstrap, topic, [first])
        assert predictions.wait_until(lambda records: len(records) == 1), service.log_tail()
        for offset, (value, error, reason) in enumerate(poison, start=1):
            send(kafka_bootstrap, topic, [value], first_key=offset)
            assert dead.wait_until(lambda records, offset=offset: len(records) == offset, timeout=60), \
                (error, service.log_tail())
            headers = dict(dead.records[-1].headers)
            assert headers["error"].decode().startswith(error), headers["error"]
            assert headers["__connect.errors.exception.class.name"].decode() == f"nbstream.{reason}"
            assert int(headers["source.offset"]) == offset and dead.records[-1].value == value
            assert service.running(), service.log_tail()
        send(kafka_bootstrap, topic, [last], first_key=len(poison) + 1)
        assert predictions.wait_until(lambda records: len(records) == 2), service.log_tail()
        assert json.loads(predictions.records[-1].value)["offset"] == len(poison) + 1
        assert service.terminate() == 0
        model, meta = service.state()
        assert model.n_examples_seen_ == 2 and meta["source"]["offsets"] == {"0": len(poison) + 2}
    finally:
        predictions.close(), dead.close()
        if service.running():
            service.kill()


def test_a_new_schema_version_mid_stream_is_read_without_a_restart(
        kafka_bootstrap, schema_registry_url, kafka_client, tmp_path):
    topic = new_topic(kafka_bootstrap, "avro-evolution")
    set_compatibility(schema_registry_url, f"{topic}-value", "BACKWARD")
    _, X, labels = labeled_messages(300, np.random.default_rng(4))
    service = avro_service(kafka_bootstrap, topic, tmp_path, schema_registry_url, client=kafka_client).start()
    watcher = TopicWatcher(kafka_bootstrap, service.output)
    try:
        first = avro_values(schema_registry_url, topic, EXAMPLE, records_of(X[:150], labels[:150]))
        send(kafka_bootstrap, topic, first)
        assert watcher.wait_until(lambda records: len(records) == 150), service.log_tail()
        later = avro_values(schema_registry_url, topic, EXAMPLE_V2,
                            records_of(X[150:], labels[150:], start_id=150, source="scanner"))
        assert registry_client(schema_registry_url).get_versions(f"{topic}-value") == [1, 2]
        send(kafka_bootstrap, topic, later, first_key=150)
        assert watcher.wait_until(lambda records: len(records) == 300), service.log_tail()
        assert service.terminate() == 0
        assert_equal_statistics(service.state()[0], X, labels)
        assert not read_all(kafka_bootstrap, f"{topic}.dlq", timeout=5)
    finally:
        watcher.close()
        if service.running():
            service.kill()


@pytest.mark.faults
def test_a_paused_registry_holds_the_records_back_without_dead_letters_and_loses_nothing(
        kafka_bootstrap, own_registry, kafka_client, tmp_path):
    topic = new_topic(kafka_bootstrap, "avro-outage")
    url = own_registry.url
    _, X, labels = labeled_messages(600, np.random.default_rng(6))
    before = avro_values(url, topic, EXAMPLE, records_of(X[:300], labels[:300]))
    # written while the registry answers, read only while it is paused: its schema is new to the service
    after = avro_values(url, topic, EXAMPLE_V2, records_of(X[300:], labels[300:], start_id=300, source="late"))
    port = free_port()
    service = avro_service(kafka_bootstrap, topic, tmp_path, url, "--metrics-port", port,
                           client=kafka_client).start()
    try:
        send(kafka_bootstrap, topic, before)
        assert wait_for(lambda: len(read_all(kafka_bootstrap, service.output, committed_only=True)) == 300), \
            service.log_tail()
        own_registry.pause()
        try:
            send(kafka_bootstrap, topic, after, first_key=300)
            assert wait_for(lambda: "the Schema Registry does not answer" in service.log_tail(20_000), timeout=30)
            assert wait_for(lambda: status(port, "/readyz") == 503, timeout=10)
            time.sleep(15)
            assert service.running() and status(port, "/healthz") == 200
            assert len(read_all(kafka_bootstrap, service.output, committed_only=True)) == 300
        finally:
            own_registry.resume()
        found = read_all(kafka_bootstrap, service.output, expected=600, committed_only=True)
        assert len(found) == 600 and covered(found) == {(0, offset) for offset in range(600)}, service.log_tail()
        assert wait_for(lambda: status(port, "/readyz") == 200, timeout=30)
        log = service.log_tail(50_000)
        assert log.count("the Schema Registry does not answer") == 1 and log.count("answers again") == 1, log
        assert not read_all(kafka_bootstrap, f"{topic}.dlq", timeout=5)
        assert service.terminate() == 0
        assert_equal_statistics(service.state()[0], X, labels)
    finally:
        own_registry.resume()
        if service.running():
            service.kill()


def status(port: int, path: str) -> int | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code
    except OSError:
        return None


def _schema(schema: dict):
    from confluent_kafka.schema_registry import Schema

    return Schema(json.dumps(schema), "AVRO")
