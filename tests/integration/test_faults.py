"""`worker serve` through broker crashes, long pauses and refused records: it keeps running and
loses nothing. These tests kill and restart a broker of their own."""

from __future__ import annotations

import json
import threading
import time
import urllib.request

import numpy as np
import pytest
from kafka import KafkaProducer

from tests.helpers.cli import run_worker
from tests.helpers.kafka import TopicWatcher, new_topic, read_all
from tests.helpers.service import Service, assert_equal_statistics, free_port, labeled_messages, metric_values, wait_for

pytestmark = pytest.mark.faults


class SteadyProducer(threading.Thread):
    """Sends the given values at a steady rate, riding out broker outages; every send confirmed."""

    def __init__(self, bootstrap: str, topic: str, values: list[bytes], rate: float, partitions: int = 1,
                 keys: list[bytes] | None = None):
        """keys : each value's record key, partitioned by the producer's hash (default: its index, round robin)."""
        super().__init__(daemon=True)
        self.bootstrap, self.topic, self.values, self.rate, self.partitions = bootstrap, topic, values, rate, partitions
        self.keys = keys
        self.error: Exception | None = None

    def run(self):
        try:
            producer = KafkaProducer(bootstrap_servers=self.bootstrap, acks="all", linger_ms=5,
                                     delivery_timeout_ms=300_000, max_block_ms=300_000, request_timeout_ms=10_000)
            started = time.monotonic()
            futures = []
            for i, value in enumerate(self.values):
                delay = started + i / self.rate - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
                if self.keys is None:
                    futures.append(producer.send(self.topic, value=value, key=str(i).encode(),
                                                 partition=i % self.partitions))
                else:
                    futures.append(producer.send(self.topic, value=value, key=self.keys[i]))
            producer.flush(timeout=300)
            for future in futures:
                future.get(timeout=300)
            producer.close()
        except Exception as error:  # noqa: BLE001 - reported by the test
            self.error = error


def topic_contents(bootstrap, topic):
    """(X, labels, (partition, offset) of each) of every message in the topic, as the broker kept them."""
    records = read_all(bootstrap, topic)
    messages = [json.loads(r.value) for r in records]
    return (np.array([m["features"] for m in messages]), np.array([m["label"] for m in messages]),
            {(r.partition, r.offset) for r in records})


def committed_predictions(bootstrap, output, expected, timeout=180):
    """The predictions a read_committed consumer sees, once it sees ``expected`` of them."""
    watcher = TopicWatcher(bootstrap, output, committed_only=True)
    watcher.wait_until(lambda records: len(records) >= expected, timeout=timeout)
    time.sleep(2)  # anything beyond would be a duplicate: give it the time to show
    watcher.wait_until(lambda records: False, timeout=1)
    watcher.close()
    return [(json.loads(r.value)["partition"], json.loads(r.value)["offset"]) for r in watcher.records]


def export(bootstrap, client, topic, group, out):
    result = run_worker("export", "--bootstrap", bootstrap, "--kafka-client", client, "--input", topic,
                        "--group", group, "--out", out, timeout=120)
    assert result.returncode == 0, result.stderr
    import nbstream

    return nbstream.load(out)


def test_a_broker_killed_mid_stream_and_restarted_loses_nothing_and_doubles_nothing(own_broker, kafka_client,
                                                                                      tmp_path):
    bootstrap = own_broker.bootstrap
    topic = new_topic(bootstrap, "broker-crash", partitions=2)
    values, _, _ = labeled_messages(3_000, np.random.default_rng(3))
    service = Service(bootstrap, topic, tmp_path, client=kafka_client).start()
    producer = SteadyProducer(bootstrap, topic, values, rate=100, partitions=2)
    producer.start()
    try:
        time.sleep(8)
        own_broker.kill()
        time.sleep(15)
        assert service.running(), service.log_tail()
        own_broker.restart()
        producer.join(timeout=300)
        assert producer.error is None, producer.error
        X, labels, offsets = topic_contents(bootstrap, topic)
        assert len(offsets) >= 3_000
        seen = committed_predictions(bootstrap, service.output, len(offsets))
        assert sorted(seen) == sorted(offsets), service.log_tail()  # one prediction per input offset
        assert service.running(), service.log_tail()
        assert service.terminate() == 0
        assert_equal_statistics(export(bootstrap, kafka_client, topic, service.group, tmp_path / "m.nbs"), X, labels)
    finally:
        if own_broker.pid is None:
            own_broker.restart()
        if service.running():
            service.kill()


def _asked(port: int) -> dict | None:
    """The inference API's answer to a one-row request (None when it does not answer 200)."""
    body = json.dumps({"inputs": [{"name": "features", "datatype": "INT64", "shape": [1, 6],
                                   "data": [1, 2, 3, 4, 5, 6]}]}).encode()
    request = urllib.request.Request(f"http://127.0.0.1:{port}/v2/models/main/infer", body,
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return json.loads(answer.read()) if answer.status == 200 else None
    except OSError:
        return None


def test_the_inference_api_answers_from_the_last_commit_while_the_broker_is_down(own_broker, kafka_client,
                                                                                   tmp_path):
    bootstrap = own_broker.bootstrap
    topic = new_topic(bootstrap, "api-outage", partitions=2)
    values, _, _ = labeled_messages(1_500, np.random.default_rng(6))
    port = free_port()
    service = Service(bootstrap, topic, tmp_path, "--http-port", port, client=kafka_client).start()
    producer = SteadyProducer(bootstrap, topic, values, rate=100, partitions=2)
    producer.start()
    try:
        assert wait_for(lambda: (_asked(port) or {}).get("model_version", "0") != "0", timeout=60), \
            service.log_tail()
        own_broker.kill()
        time.sleep(3)
        during = [_asked(port) for _ in range(5)]
        assert all(answer is not None for answer in during), service.log_tail()  # no commit, still answers
        for answer in during:  # each from one committed state: its examples are its position's messages
            assert int(answer["model_version"]) == sum(answer["parameters"]["position"].values())
        own_broker.restart()
        producer.join(timeout=300)
        assert producer.error is None, producer.error

        def all_committed() -> bool:
            answer = _asked(port)
            return answer is not None and answer["model_version"] == "1500"

        assert wait_for(all_committed, timeout=180), service.log_tail()
        assert sum(_asked(port)["parameters"]["position"].values()) == 1_500
        assert service.terminate() == 0
    finally:
        if own_broker.pid is None:
            own_broker.restart()
        if service.running():
            service.kill()


def test_a_replica_paused_past_its_session_timeout_carries_on_exactly(kafka_bootstrap, kafka_client, tmp_path):
    topic = new_topic(kafka_bootstrap, "paused", partitions=2)
    values, _, _ = labeled_messages(2_000, np.random.default_rng(4))
    service = Service(kafka_bootstrap, topic, tmp_path, "--session-timeout", 6, client=kafka_client).start()
    producer = SteadyProducer(kafka_bootstrap, topic, values, rate=100, partitions=2)
    producer.start()
    try:
        time.sleep(5)
        service.pause()
        time.sleep(15)
        service.resume()
        producer.join(timeout=120)
        assert producer.error is None
        X, labels, offsets = topic_contents(kafka_bootstrap, topic)
        seen = committed_predictions(kafka_bootstrap, service.output, len(offsets))
        assert sorted(seen) == sorted(offsets), service.log_tail()
        assert service.running(), service.log_tail()
        assert service.terminate() == 0
        model = export(kafka_bootstrap, kafka_client, topic, service.group, tmp_path / "m.nbs")
        assert_equal_statistics(model, X, labels)
    finally:
        if service.running():
            service.resume()
            service.kill()


def get(port, path):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()
    except OSError:
        return None, ""


def test_started_while_the_broker_is_down_it_waits_then_serves(own_broker, kafka_client, tmp_path):
    from tests.helpers.kafka import send

    bootstrap = own_broker.bootstrap
    topic = new_topic(bootstrap, "late-broker")
    values, X, labels = labeled_messages(300, np.random.default_rng(5))
    send(bootstrap, topic, values)
    port = free_port()
    own_broker.kill()
    service = Service(bootstrap, topic, tmp_path, "--metrics-port", port, client=kafka_client).start()
    try:
        assert wait_for(lambda: get(port, "/healthz")[0] == 200, timeout=30), service.log_tail()
        time.sleep(25)  # two attempts or more
        assert service.running(), service.log_tail()
        assert get(port, "/healthz")[0] == 200 and get(port, "/readyz")[0] == 503
        assert "nbstream_kafka_connected 0.0" in get(port, "/metrics")[1]
        waiting = [line for line in service.log_tail(20_000).splitlines() if "Kafka failed" in line]
        assert len(waiting) == 1, waiting  # one line for the outage, not one per retry
        own_broker.restart()
        seen = committed_predictions(bootstrap, service.output, 300)
        assert sorted(offset for _, offset in seen) == list(range(300)), service.log_tail()
        assert wait_for(lambda: get(port, "/readyz")[0] == 200, timeout=30)
        assert "Kafka session started again" in service.log_tail(20_000)
        assert service.terminate() == 0
        assert_equal_statistics(service.state()[0], X, labels)
    finally:
        if own_broker.pid is None:
            own_broker.restart()
        if service.running():
            service.kill()


def test_a_stop_while_no_broker_answers_ends_the_process_cleanly(kafka_client, tmp_path):
    unreachable = f"127.0.0.1:{free_port()}"
    service = Service(unreachable, "never-read", tmp_path, client=kafka_client).start()
    try:
        assert wait_for(lambda: "Kafka failed" in service.log_tail(), timeout=60), service.log_tail()
        started = time.monotonic()
        assert service.terminate(timeout=30) == 0, service.log_tail()
        assert time.monotonic() - started < 30
        assert "stopped before a Kafka session started" in service.log_tail()
        assert "Traceback" not in service.log_tail(20_000)
    finally:
        if service.running():
            service.kill()


def test_predictions_an_output_topic_refuses_go_to_the_dead_letters(kafka_bootstrap, kafka_client, tmp_path):
    from tests.helpers.kafka import json_message, send

    topic = new_topic(kafka_bootstrap, "refused")
    new_topic_name = f"{topic}.predictions"
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic

    admin = KafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    admin.create_topics([NewTopic(new_topic_name, 1, 1, topic_configs={"max.message.bytes": "600"})])
    admin.close()
    values = [json_message(features=[1, 2, 0, 1, 0, 3], label="ham" if i % 2 else "spam",
                           id=("x" * 700 if i % 4 == 0 else i)) for i in range(400)]
    send(kafka_bootstrap, topic, values)
    port = free_port()
    service = Service(kafka_bootstrap, topic, tmp_path, "--metrics-port", port, client=kafka_client).start()
    try:
        big = {i for i in range(400) if i % 4 == 0}
        dead = read_all(kafka_bootstrap, f"{topic}.dlq", expected=len(big), timeout=90, committed_only=True)
        predictions = read_all(kafka_bootstrap, service.output, expected=400 - len(big), timeout=90,
                               committed_only=True)
        assert {int(dict(r.headers)["source.offset"]) for r in dead} == big, service.log_tail()
        assert all(dict(r.headers)["error"].decode().startswith("prediction of ") for r in dead)
        assert sorted(json.loads(r.value)["offset"] for r in predictions) == sorted(set(range(400)) - big)
        assert service.running()
        counted = metric_values(port)  # a prediction that became a dead letter is counted as one only
        assert counted["nbstream_predictions_total"] == 300 and counted["nbstream_messages_total"] == 400
        assert counted['nbstream_dead_letters_total{reason="output_too_large"}'] == 100
        assert service.terminate() == 0
        assert service.state()[0].n_examples_seen_ == 400  # refused outputs do not undo learning
    finally:
        if service.running():
            service.kill()


def test_an_idle_service_writes_nothing(kafka_bootstrap, kafka_client, tmp_path):
    from tests.helpers.kafka import send

    topic = new_topic(kafka_bootstrap, "idle")
    values, _, _ = labeled_messages(500, np.random.default_rng(6))
    send(kafka_bootstrap, topic, values)
    service = Service(kafka_bootstrap, topic, tmp_path, client=kafka_client).start()
    state_topic = f"{topic}.{service.group}.nbstream-state"
    try:
        assert len(read_all(kafka_bootstrap, service.output, expected=500)) == 500
        assert wait_for(lambda: service.checkpoints() and service.state()[1]["source"]["offsets"] == {"0": 500},
                        timeout=60)
        time.sleep(2)
        before = (service.checkpoints(), len(read_all(kafka_bootstrap, state_topic)))
        time.sleep(6)  # a dozen commit intervals
        assert (service.checkpoints(), len(read_all(kafka_bootstrap, state_topic))) == before
        assert service.terminate() == 0
    finally:
        if service.running():
            service.kill()


def test_produce_confirms_every_record_and_never_hangs(kafka_bootstrap, kafka_client, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "rows.parquet"
    pq.write_table(pa.table({"text": ["short"] * 50 + ["long " * 400] * 5, "label": ["a"] * 55}), path)
    topic = new_topic(kafka_bootstrap, "produce-limit", config={"max.message.bytes": "1000"})
    result = run_worker("produce", path, "--bootstrap", kafka_bootstrap, "--kafka-client", kafka_client,
                        "--topic", topic, "--text", "text", "--label", "label", timeout=120)
    assert result.returncode == 1
    assert "5 of 55 messages were not delivered" in result.stderr
    assert len(read_all(kafka_bootstrap, topic)) == 50
    started = time.monotonic()
    result = run_worker("produce", path, "--bootstrap", "127.0.0.1:9", "--kafka-client", kafka_client,
                        "--topic", topic, "--text", "text", timeout=180)
    assert result.returncode != 0 and time.monotonic() - started < 150
    assert len(result.stderr.strip().splitlines()) == 1 and result.stderr.startswith("error: "), result.stderr


def test_a_record_the_broker_refuses_after_a_limit_change_goes_to_the_dead_letters(kafka_bootstrap, kafka_client,
                                                                                    tmp_path):
    from kafka import KafkaAdminClient
    from kafka.admin import ConfigResource, ConfigResourceType

    from tests.helpers.kafka import json_message, send

    topic = new_topic(kafka_bootstrap, "limit-lowered")
    port = free_port()
    service = Service(kafka_bootstrap, topic, tmp_path, "--metrics-port", port, client=kafka_client).start()
    try:
        send(kafka_bootstrap, topic, [json_message(features=[1, 0, 0, 1, 0, 1], label="ham", id=0)])
        assert len(read_all(kafka_bootstrap, service.output, expected=1)) == 1, service.log_tail()
        admin = KafkaAdminClient(bootstrap_servers=kafka_bootstrap)  # the service measured the old limit
        admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, service.output,
                                            configs={"max.message.bytes": "600"})])
        admin.close()
        time.sleep(2)
        values = [json_message(features=[1, 2, 0, 1, 0, 3], label="spam", id="x" * 700 if i == 3 else i)
                  for i in range(1, 8)]
        send(kafka_bootstrap, topic, values, first_key=1)
        dead = read_all(kafka_bootstrap, f"{topic}.dlq", expected=1, timeout=90, committed_only=True)
        assert [int(dict(r.headers)["source.offset"]) for r in dead] == [3], service.log_tail()
        # The refused batch made suspects; the next session measured the new limit and sent each alone.
        assert dict(dead[0].headers)["error"].decode().startswith("prediction of ")
        assert "exceeds the limit of 600" in dict(dead[0].headers)["error"].decode()
        predictions = read_all(kafka_bootstrap, service.output, expected=7, timeout=30, committed_only=True)
        assert sorted(json.loads(r.value)["offset"] for r in predictions) == [0, 1, 2, 4, 5, 6, 7]
        # the sessions that failed on the refusal are not counted: each message once
        assert wait_for(lambda: metric_values(port).get("nbstream_messages_total") == 8, timeout=30)
        counted = metric_values(port)
        assert counted["nbstream_predictions_total"] == 7 and counted["nbstream_examples_learned_total"] == 8
        assert sum(v for k, v in counted.items() if k.startswith("nbstream_dead_letters_total")) == 1
        assert service.running() and service.terminate() == 0
    finally:
        if service.running():
            service.kill()
