"""`worker serve` with a hostile Schema Registry in front of the real one (tests/helpers/hostile_http.py
relaying to Apicurio), on the real broker, each bad behaviour alone: answers with fields of the wrong
type, an answer trickled a byte every 2 s, a redirect to another origin, 3,000 unknown schema ids in
one poll. The service never crashes, hangs or sends its credentials elsewhere, and stops promptly."""

from __future__ import annotations

import base64
import json
import time

import numpy as np
import pytest

from tests.helpers.hostile_http import HostileServer, json_answer, redirect, relay, routes, trickle
from tests.helpers.kafka import TopicWatcher, new_topic, read_all, send
from tests.helpers.registry import avro_values, protobuf_values
from tests.helpers.service import covered, free_port, labeled_messages, wait_for
from tests.integration.test_avro_serve import EXAMPLE, EXAMPLE_V2, avro_service, records_of, status
from tests.integration.test_protobuf_serve import Example, examples, protobuf_service
from worker.io.registry.schemas import MOST_FETCHES_PER_POLL
from worker.io.registry.wire import frame

STOP_SECONDS = 10.0  # the longest a stop may take, whatever the registry does
PASSWORD = "registry-password-8c41"


def stop_seconds(service) -> float:
    """SIGTERM, and the seconds until the process has exited (with status 0)."""
    started = time.monotonic()
    assert service.terminate(timeout=60) == 0, service.log_tail()
    elapsed = time.monotonic() - started
    print(f"stopped {elapsed:.2f} s after SIGTERM")  # noqa: T201 - the figure the docs quote
    return elapsed


def schema_requests(registry: HostileServer) -> list[str]:
    return [r.path for r in registry.requests if r.path.startswith("/schemas/ids/")]


WRONG_TYPES = {  # format -> the answers for two schema ids, each a schema problem
    "avro": [{"schema": json.dumps(EXAMPLE), "schemaType": 5},
             {"schema": json.dumps(EXAMPLE), "schemaType": ["AVRO"]}],
    "protobuf": [{"schema": "c3ludGF4", "schemaType": "PROTOBUF", "references": ["x"]},
                 {"schema": "c3ludGF4", "schemaType": "PROTOBUF", "references": {"name": "a"}}],
}


@pytest.mark.parametrize("message_format", WRONG_TYPES)
def test_answers_with_fields_of_the_wrong_type_make_dead_letters_not_a_crash(
        kafka_bootstrap, schema_registry_url, kafka_client, message_format, tmp_path):
    topic = new_topic(kafka_bootstrap, f"registry-types-{message_format}")
    _, X, labels = labeled_messages(2, np.random.default_rng(7))
    if message_format == "avro":
        good = avro_values(schema_registry_url, topic, EXAMPLE, records_of(X, labels))
        service_of = avro_service
    else:
        good = protobuf_values(schema_registry_url, topic, examples(Example, X, labels))
        service_of = protobuf_service
    answers = WRONG_TYPES[message_format]
    bad_ids = [900_001 + i for i in range(len(answers))]
    registry = HostileServer(routes({f"/schemas/ids/{i}": json_answer(found)
                                     for i, found in zip(bad_ids, answers, strict=True)}, relay(schema_registry_url)))
    service = service_of(kafka_bootstrap, topic, tmp_path, registry.url, client=kafka_client).start()
    predictions, dead = TopicWatcher(kafka_bootstrap, service.output), TopicWatcher(kafka_bootstrap, f"{topic}.dlq")
    try:
        send(kafka_bootstrap, topic, good[:1])
        assert predictions.wait_until(lambda records: len(records) == 1), service.log_tail()
        for offset, schema_id in enumerate(bad_ids, start=1):  # each alone
            send(kafka_bootstrap, topic, [frame(schema_id, good[0][5:])], first_key=offset)
            assert dead.wait_until(lambda records, offset=offset: len(records) == offset, timeout=60), \
                service.log_tail()
            headers = dict(dead.records[-1].headers)
            assert headers["error"].decode().startswith(
                f"schema {schema_id} cannot be read from the Schema Registry's answer: its "), headers["error"]
            assert headers["__connect.errors.exception.class.name"] == b"nbstream.schema"
            assert service.running(), service.log_tail()
        send(kafka_bootstrap, topic, good[1:], first_key=len(bad_ids) + 1)
        assert predictions.wait_until(lambda records: len(records) == 2), service.log_tail()
        assert service.terminate() == 0
        assert "Traceback" not in service.log_tail(50_000)
    finally:
        predictions.close(), dead.close()
        registry.stop()
        if service.running():
            service.kill()


def test_a_registry_trickling_its_answer_is_an_outage_at_the_deadline_and_a_stop_is_prompt(
        kafka_bootstrap, schema_registry_url, kafka_client, tmp_path):
    """One byte every 2 s (each read well within any per-read timeout) had held the service for
    good: no WARNING, /readyz 200, SIGTERM not obeyed within 40 s."""
    topic = new_topic(kafka_bootstrap, "registry-trickles")
    _, X, labels = labeled_messages(60, np.random.default_rng(43))
    before = avro_values(schema_registry_url, topic, EXAMPLE, records_of(X[:30], labels[:30]))
    # registered now, first asked for while the registry trickles: the service has not fetched it yet
    after = avro_values(schema_registry_url, topic, EXAMPLE_V2, records_of(X[30:], labels[30:], start_id=30,
                                                                           source="late"))
    port = free_port()
    registry = HostileServer(relay(schema_registry_url))
    service = avro_service(kafka_bootstrap, topic, tmp_path, registry.url, "--metrics-port", port,
                           client=kafka_client).start()
    try:
        send(kafka_bootstrap, topic, before)
        assert wait_for(lambda: len(read_all(kafka_bootstrap, service.output, committed_only=True)) == 30), \
            service.log_tail()
        registry.behaviour = trickle(json.dumps({"schema": json.dumps(EXAMPLE_V2)}).encode(), every_s=2.0)
        asked = len(schema_requests(registry))
        send(kafka_bootstrap, topic, after, first_key=30)
        assert wait_for(lambda: "the Schema Registry does not answer: records wait for it" in service.log_tail(20_000),
                        timeout=30), service.log_tail()
        assert f"the Schema Registry at {registry.url} did not answer within 5 s" in service.log_tail(20_000)
        assert wait_for(lambda: status(port, "/readyz") == 503, timeout=10)
        assert len(read_all(kafka_bootstrap, service.output, committed_only=True)) == 30
        fetches = len(schema_requests(registry))
        assert fetches > asked
        assert wait_for(lambda: len(schema_requests(registry)) > fetches, timeout=30)  # a fetch trickling now
        assert stop_seconds(service) < STOP_SECONDS
        found = read_all(kafka_bootstrap, service.output, committed_only=True)
        assert covered(found) == {(0, offset) for offset in range(30)}  # nothing past the poll committed
        assert service.state()[1]["source"]["offsets"] == {"0": 30}
        assert not read_all(kafka_bootstrap, f"{topic}.dlq", timeout=5)
    finally:
        registry.stop()
        if service.running():
            service.kill()


def test_a_redirect_to_another_origin_while_serving_is_waited_out_and_the_credentials_go_nowhere(
        kafka_bootstrap, schema_registry_url, kafka_client, tmp_path, monkeypatch):
    monkeypatch.setenv("NBSTREAM_SCHEMA_REGISTRY_PASSWORD", PASSWORD)
    topic = new_topic(kafka_bootstrap, "registry-redirects")
    _, X, labels = labeled_messages(60, np.random.default_rng(44))
    before = avro_values(schema_registry_url, topic, EXAMPLE, records_of(X[:30], labels[:30]))
    after = avro_values(schema_registry_url, topic, EXAMPLE_V2, records_of(X[30:], labels[30:], start_id=30,
                                                                           source="late"))
    port = free_port()
    registry, elsewhere = HostileServer(relay(schema_registry_url)), HostileServer(json_answer({}))
    service = avro_service(kafka_bootstrap, topic, tmp_path, registry.url, "--schema-registry-user", "alice",
                           "--metrics-port", port, client=kafka_client).start()
    try:
        send(kafka_bootstrap, topic, before)
        assert wait_for(lambda: len(read_all(kafka_bootstrap, service.output, committed_only=True)) == 30), \
            service.log_tail()
        registry.behaviour = redirect(307, elsewhere.url + "/schemas/ids/1")
        send(kafka_bootstrap, topic, after, first_key=30)
        assert wait_for(lambda: "the Schema Registry refuses access: records wait for it" in service.log_tail(20_000),
                        timeout=30), service.log_tail()
        assert f"redirects to another origin ({elsewhere.url}), where requests (and their credentials) are never sent" \
            in service.log_tail(20_000)
        assert wait_for(lambda: status(port, "/readyz") == 503, timeout=10)
        assert elsewhere.requests == []
        assert {r.headers.get("Authorization") for r in registry.requests} == {
            "Basic " + base64.b64encode(f"alice:{PASSWORD}".encode()).decode()}
        registry.behaviour = relay(schema_registry_url)
        found = read_all(kafka_bootstrap, service.output, expected=60, committed_only=True)
        assert covered(found) == {(0, offset) for offset in range(60)}, service.log_tail()
        assert service.terminate() == 0
        assert PASSWORD not in service.log_tail(100_000)
    finally:
        registry.stop(), elsewhere.stop()
        if service.running():
            service.kill()


def test_three_thousand_unknown_schema_ids_in_one_poll_cost_a_bounded_number_of_requests(
        kafka_bootstrap, schema_registry_url, kafka_client, tmp_path):
    """They had cost about 6,000 requests (the 10 s memory of an unknown id ran out within the poll)."""
    topic = new_topic(kafka_bootstrap, "registry-flood")
    _, X, labels = labeled_messages(2, np.random.default_rng(45))
    good = avro_values(schema_registry_url, topic, EXAMPLE, records_of(X, labels))
    flood = [frame(2_000_000 + i, good[0][5:]) for i in range(3000)]
    send(kafka_bootstrap, topic, [good[0], *flood, good[1]])  # all there before the service polls: one poll
    registry = HostileServer(relay(schema_registry_url))
    service = avro_service(kafka_bootstrap, topic, tmp_path, registry.url, client=kafka_client).start()
    try:
        dead = read_all(kafka_bootstrap, f"{topic}.dlq", expected=3000, timeout=120, committed_only=True)
        assert len(dead) == 3000, service.log_tail()
        assert len(read_all(kafka_bootstrap, service.output, expected=2, committed_only=True)) == 2
        asked = schema_requests(registry)
        assert len(asked) <= MOST_FETCHES_PER_POLL + 1 and len(set(asked)) == len(asked), asked  # + the good id
        reasons = [dict(record.headers)["__connect.errors.exception.class.name"] for record in dead]
        assert reasons.count(b"nbstream.unknown_schema") == len(asked) - 1
        assert reasons.count(b"nbstream.schema") == 3000 - (len(asked) - 1)
        assert service.terminate() == 0
    finally:
        registry.stop()
        if service.running():
            service.kill()
